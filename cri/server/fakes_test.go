package server

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/image"
	"github.com/evjournal/containerd/podnet"
)

// fakeImages is an image store on a temp dir: a rootfs is a directory.
type fakeImages struct {
	f   *faults
	dir string

	mu       sync.Mutex
	images   map[string]image.Image  // by ref and by id; guarded by mu
	pullable map[string]image.Image  // what Pull finds; guarded by mu
	rootfs   map[string]image.Rootfs // by container id; guarded by mu
}

func newFakeImages(f *faults, dir string) *fakeImages {
	return &fakeImages{f: f, dir: dir, images: map[string]image.Image{}, pullable: map[string]image.Image{}, rootfs: map[string]image.Rootfs{}}
}

func (s *fakeImages) add(ref string, img image.Image) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.images[ref], s.images[img.ID] = img, img
}

func (s *fakeImages) Get(ref string) (image.Image, error) {
	s.f.record("Get", ref, nil)
	if err := s.f.at("Get", ref); err != nil {
		return image.Image{}, err
	}
	return s.lookup(ref)
}

func (s *fakeImages) lookup(ref string) (image.Image, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	img, ok := s.images[ref]
	if !ok {
		return image.Image{}, fmt.Errorf("image %q: %w", ref, errdefs.ErrNotFound)
	}
	return img, nil
}

func (s *fakeImages) Pull(ctx context.Context, ref string, _ *image.Auth) (image.Image, error) {
	s.f.record("Pull", ref, ctx)
	if err := s.f.at("Pull", ref); err != nil {
		return image.Image{}, err
	}
	s.mu.Lock()
	img, ok := s.pullable[ref]
	s.mu.Unlock()
	if !ok {
		return image.Image{}, fmt.Errorf("pull %q: %w", ref, errdefs.ErrNotFound)
	}
	s.add(ref, img)
	return img, nil
}

func (s *fakeImages) PrepareRootfs(id, ref string, _ ...image.IDMap) (string, error) {
	s.f.record("PrepareRootfs", id, nil)
	if err := s.f.at("PrepareRootfs", id); err != nil {
		return "", err
	}
	img, err := s.lookup(ref)
	if err != nil {
		return "", err
	}
	path := filepath.Join(s.dir, id, "rootfs")
	if err := os.MkdirAll(path, 0o755); err != nil {
		return "", err
	}
	s.mu.Lock()
	s.rootfs[id] = image.Rootfs{ContainerID: id, ImageID: img.ID, Path: path, Mounted: true}
	s.mu.Unlock()
	return path, s.f.at("PrepareRootfs.after", id)
}

func (s *fakeImages) MountRootfs(id string) (string, error) {
	s.f.record("MountRootfs", id, nil)
	if err := s.f.at("MountRootfs", id); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rootfs[id]
	if !ok {
		return "", fmt.Errorf("rootfs of %s: %w", id, errdefs.ErrNotFound)
	}
	r.Mounted = true
	s.rootfs[id] = r
	return r.Path, nil
}

func (s *fakeImages) RemoveRootfs(id string) error {
	s.f.record("RemoveRootfs", id, nil)
	if err := s.f.at("RemoveRootfs", id); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.rootfs[id]; !ok {
		return nil
	}
	delete(s.rootfs, id)
	return os.RemoveAll(filepath.Join(s.dir, id))
}

func (s *fakeImages) ListRootfs() []image.Rootfs {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]image.Rootfs, 0, len(s.rootfs))
	for _, r := range s.rootfs {
		out = append(out, r)
	}
	return out
}

// reboot unmounts every rootfs, as a reboot does.
func (s *fakeImages) reboot() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, r := range s.rootfs {
		r.Mounted = false
		s.rootfs[id] = r
	}
}

// rootfsIDs are the containers with a prepared rootfs, sorted.
func (s *fakeImages) rootfsIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id := range s.rootfs {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// fakeNetwork is a CNI network: Setup takes a lease (an IP) for the pod,
// Teardown gives it back. A Setup that fails after acting (at
// "Setup.after") keeps its lease, as a CNI ADD cut short midway does.
type fakeNetwork struct {
	f *faults

	mu     sync.Mutex
	leases map[string]string // pod id -> netns; guarded by mu
	next   byte              // guarded by mu
}

func newFakeNetwork(f *faults) *fakeNetwork { return &fakeNetwork{f: f, leases: map[string]string{}} }

func (n *fakeNetwork) Setup(ctx context.Context, podID, netns string, _ podnet.SetupOptions) (podnet.Result, error) {
	n.f.record("Setup", podID, ctx)
	if err := n.f.at("Setup", podID); err != nil {
		return podnet.Result{}, err
	}
	if _, err := os.Stat(netns); err != nil {
		return podnet.Result{}, fmt.Errorf("netns: %w", err)
	}
	n.mu.Lock()
	n.leases[podID] = netns
	n.next++
	ip := net.IPv4(10, 88, 0, n.next)
	n.mu.Unlock()
	if err := n.f.at("Setup.after", podID); err != nil {
		return podnet.Result{}, err
	}
	return podnet.Result{IPs: []net.IP{ip}, Interface: "eth0"}, nil
}

func (n *fakeNetwork) Teardown(ctx context.Context, podID, _ string) error {
	n.f.record("Teardown", podID, ctx)
	if err := n.f.at("Teardown", podID); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.leases, podID)
	return nil
}

func (n *fakeNetwork) Status() error { return n.f.at("Status", "") }

func (n *fakeNetwork) leaseIDs() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for id := range n.leases {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// fakeMounts pins a netns as an empty file (O_EXCL, as podnet does) and
// "mounts" a /dev/shm as a directory; what is mounted is remembered.
type fakeMounts struct {
	f *faults

	mu      sync.Mutex
	mounted map[string]bool // guarded by mu
}

func newFakeMounts(f *faults) *fakeMounts { return &fakeMounts{f: f, mounted: map[string]bool{}} }

func (m *fakeMounts) NewNetNS(dir, id string) error { return m.pin("NewNetNS", dir, id) }

func (m *fakeMounts) PinNetNS(dir, id string, _ int) error { return m.pin("PinNetNS", dir, id) }

func (m *fakeMounts) pin(what, dir, id string) error {
	m.f.record(what, id, nil)
	if err := m.f.at(what, id); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, id), os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return err
	}
	m.mount(filepath.Join(dir, id), true)
	return f.Close()
}

func (m *fakeMounts) RemoveNetNS(path string) error { return m.unmount("RemoveNetNS", path, os.Remove) }

func (m *fakeMounts) MountShm(dir string) error {
	m.f.record("MountShm", filepath.Base(dir), nil)
	if err := m.f.at("MountShm", filepath.Base(dir)); err != nil {
		return err
	}
	m.mount(dir, true)
	return os.MkdirAll(dir, 0o755)
}

func (m *fakeMounts) UnmountShm(dir string) error {
	if dir == "" {
		return nil
	}
	return m.unmount("UnmountShm", dir, os.Remove)
}

func (m *fakeMounts) unmount(what, path string, remove func(string) error) error {
	m.f.record(what, filepath.Base(path), nil)
	if err := m.f.at(what, filepath.Base(path)); err != nil {
		return err
	}
	m.mount(path, false)
	if err := remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

func (m *fakeMounts) mount(path string, on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if on {
		m.mounted[path] = true
	} else {
		delete(m.mounted, path)
	}
}

// mounts are what is mounted, sorted.
func (m *fakeMounts) mounts() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for p := range m.mounted {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}
