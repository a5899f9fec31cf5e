package image_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/image"
	"github.com/evjournal/containerd/integration/fixture"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"golang.org/x/sys/unix"
)

// TestPullPrepareRootfs: an image pushed as an index of two platforms is
// pulled for this one; its rootfs shows what a container would see: the
// whiteout deletes, the opaque dir holds only the upper layer's content,
// ownership and xattrs are kept, and the test init runs chrooted in it.
// The image cannot be removed while the rootfs exists, and is once it is gone.
func TestPullPrepareRootfs(t *testing.T) {
	fixture.RequireRoot(t)
	reg := newRegistry(t)
	img := fixture.ImageOf(t, testConfig, baseLayer(t), upperLayer(t))
	other := "s390x"
	if goruntime.GOARCH == other {
		other = "arm64"
	}
	foreign := fixture.ImageOf(t, v1.Config{}, fixture.LayerOf(t, fixture.File{Name: "foreign", Body: "wrong platform"}))
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: foreign, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: other}}},
		mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: goruntime.GOARCH}}},
	)
	reg.pushIndex(t, "test/app:1", idx)
	s, root := newStore(t, image.Options{})

	ref := reg.host + "/test/app:1"
	got, err := s.Pull(ctx(t), ref, nil)
	if err != nil {
		t.Fatalf("Pull: %v", err)
	}
	wantID, _ := img.ConfigName()
	idxDigest, _ := idx.Digest()
	if got.ID != wantID.String() {
		t.Errorf("ID = %s, want the config digest %s", got.ID, wantID)
	}
	if !slices.Equal(got.RepoTags, []string{ref}) || !slices.Equal(got.RepoDigests, []string{reg.host + "/test/app@" + idxDigest.String()}) {
		t.Errorf("RepoTags %v, RepoDigests %v", got.RepoTags, got.RepoDigests)
	}
	if len(got.Layers) != 2 || got.Size == 0 {
		t.Errorf("Layers %v, Size %d", got.Layers, got.Size)
	}
	if c := got.Config; c.User != "1000:1000" || c.WorkingDir != "/data" || !slices.Equal(c.Entrypoint, testConfig.Entrypoint) ||
		!slices.Equal(c.Cmd, testConfig.Cmd) || !slices.Equal(c.Env, testConfig.Env) {
		t.Errorf("Config = %+v", c)
	}

	rootfs, err := s.PrepareRootfs("c1", ref)
	if err != nil {
		t.Fatalf("PrepareRootfs: %v", err)
	}
	if rootfs != filepath.Join(root, "containers", "c1", "rootfs") {
		t.Errorf("rootfs at %s", rootfs)
	}
	checkRootfs(t, rootfs)

	err = s.Remove(ref)
	if !errors.Is(err, image.ErrInUse) || !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "c1") {
		t.Fatalf("Remove while in use: %v, want ErrInUse naming c1", err)
	}
	if err := s.RemoveRootfs("c1"); err != nil {
		t.Fatalf("RemoveRootfs: %v", err)
	}
	if err := s.RemoveRootfs("c1"); err != nil {
		t.Fatalf("RemoveRootfs again: %v, want nil (idempotent)", err)
	}
	if m := fixture.MountsUnder(t, root); len(m) > 0 {
		t.Fatalf("mounts after RemoveRootfs: %v", m)
	}
	if err := s.Remove(ref); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	wantEmptyStore(t, s, root)
}

// checkRootfs asserts what a container sees in the rootfs of the test image.
func checkRootfs(t *testing.T, rootfs string) {
	t.Helper()
	if _, err := os.Lstat(filepath.Join(rootfs, "etc/gone")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("etc/gone: %v, want it deleted by the whiteout", err)
	}
	if e := entries(t, filepath.Join(rootfs, "data")); !slices.Equal(e, []string{"new"}) {
		t.Errorf("data/ holds %v, want only [new] (opaque dir)", e)
	}
	if fi, err := os.Stat(filepath.Join(rootfs, "data")); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("data/: %v, %v; want mode 0750 from the upper layer", fi, err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(rootfs, "etc/owned"), &st); err != nil || st.Uid != 1000 || st.Gid != 1000 || st.Mode&0o777 != 0o640 {
		t.Errorf("etc/owned: uid %d gid %d mode %o (%v), want 1000 1000 640", st.Uid, st.Gid, st.Mode&0o777, err)
	}
	buf := make([]byte, 64)
	n, err := unix.Lgetxattr(filepath.Join(rootfs, "etc/xattr"), "user.test", buf)
	if err != nil || string(buf[:n]) != "kept" {
		t.Errorf("etc/xattr user.test = %q, %v; want kept", buf[:max(n, 0)], err)
	}
	cmd := exec.Command("/testinit", "echo", "in", "the", "rootfs")
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: rootfs}
	cmd.Dir = "/"
	if out, err := cmd.CombinedOutput(); err != nil || string(out) != "in the rootfs\n" {
		t.Errorf("/testinit chrooted in the rootfs: %q, %v", out, err)
	}
}

// TestMirror: a registry.k8s.io name is pulled from the mirrors in order
// (the first lacks the image), never from registry.k8s.io itself, and is
// recorded under its own name. A name missing everywhere fails with an error
// naming each endpoint tried.
func TestMirror(t *testing.T) {
	fixture.RequireRoot(t)
	empty := newRegistry(t)
	reg := newRegistry(t)
	reg.push(t, "e2e-test-images/busybox:1.29-2", fixture.ImageOf(t, testConfig, baseLayer(t)))
	mirrors := []string{"http://" + empty.host, "http://" + reg.host}
	// mirrored.invalid stands for a registry that is never reached: the
	// .invalid domain does not resolve.
	s, _ := newStore(t, image.Options{Mirrors: map[string][]string{"registry.k8s.io": mirrors, "mirrored.invalid": mirrors}})
	const ref = "registry.k8s.io/e2e-test-images/busybox:1.29-2"
	img, err := s.Pull(ctx(t), ref, nil)
	if err != nil {
		t.Fatalf("Pull through the mirror: %v", err)
	}
	if !slices.Equal(img.RepoTags, []string{ref}) || !strings.HasPrefix(img.RepoDigests[0], "registry.k8s.io/e2e-test-images/busybox@sha256:") {
		t.Errorf("names %v %v", img.RepoTags, img.RepoDigests)
	}
	if _, err := s.Get(ref); err != nil {
		t.Errorf("Get %s: %v", ref, err)
	}
	// Missing from every mirror: the error names each endpoint.
	_, err = s.Pull(ctx(t), "mirrored.invalid/e2e-test-images/busybox:missing", nil)
	if !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), "mirror http://"+empty.host) || !strings.Contains(err.Error(), "busybox:missing") {
		t.Errorf("missing tag: %v, want not found naming the ref and the mirrors", err)
	}
	t.Logf("missing tag: %v", err)
}

// TestAuth: a registry that wants basic auth serves the right credentials
// and refuses wrong or missing ones with an unauthenticated error naming the
// ref, leaving nothing on disk.
func TestAuth(t *testing.T) {
	fixture.RequireRoot(t)
	reg := newRegistry(t)
	reg.push(t, "private/app:1", fixture.ImageOf(t, testConfig, baseLayer(t)))
	reg.setAuth("alice", "s3cret")
	s, root := newStore(t, image.Options{})
	ref := reg.host + "/private/app:1"
	for _, auth := range []*image.Auth{nil, {Username: "alice", Password: "wrong"}, {Username: "bob", Password: "s3cret"}} {
		_, err := s.Pull(ctx(t), ref, auth)
		if !errdefs.IsUnauthorized(err) || !strings.Contains(err.Error(), ref) {
			t.Errorf("auth %+v: %v, want unauthenticated naming %s", auth, err, ref)
		}
		t.Logf("auth %+v: %v", auth, err)
	}
	wantEmptyStore(t, s, root)
	for _, auth := range []*image.Auth{
		{Username: "alice", Password: "s3cret"},
		{Auth: "YWxpY2U6czNjcmV0"}, // base64("alice:s3cret")
		{Username: "alice", Password: "s3cret", ServerAddress: "http://" + reg.host + "/v2/"},
	} {
		if _, err := s.Pull(ctx(t), ref, auth); err != nil {
			t.Errorf("auth %+v: %v", auth, err)
		}
	}
	// A credential for another server is not sent.
	_, err := s.Pull(ctx(t), ref, &image.Auth{Username: "alice", Password: "s3cret", ServerAddress: "elsewhere.example"})
	if !errdefs.IsUnauthorized(err) {
		t.Errorf("credential for another server: %v, want unauthenticated", err)
	}
}

// TestTamperedLayer: the registry serves altered bytes for the upper layer;
// the pull fails with a data-loss error naming the ref and the layer, and
// the base layer it had unpacked is gone too.
func TestTamperedLayer(t *testing.T) {
	fixture.RequireRoot(t)
	reg := newRegistry(t)
	upper := upperLayer(t)
	reg.push(t, "test/app:1", fixture.ImageOf(t, testConfig, baseLayer(t), upper))
	digest, _ := upper.Digest()
	reg.setTamper(digest.String())
	s, root := newStore(t, image.Options{})
	ref := reg.host + "/test/app:1"
	_, err := s.Pull(ctx(t), ref, nil)
	if !errdefs.IsDataLoss(err) || !strings.Contains(err.Error(), ref) || !strings.Contains(err.Error(), digest.String()) {
		t.Fatalf("tampered pull: %v, want data loss naming %s and %s", err, ref, digest)
	}
	t.Logf("tampered pull: %v", err)
	wantEmptyStore(t, s, root)
	reg.setTamper("")
	if _, err := s.Pull(ctx(t), ref, nil); err != nil {
		t.Fatalf("pull once the registry is honest: %v", err)
	}
}

// TestReopen: a new Store on the same root knows the images and the
// prepared rootfs (Remove is still refused); a rootfs whose mount vanished
// (a reboot) is reported unmounted and comes back with MountRootfs.
func TestReopen(t *testing.T) {
	fixture.RequireRoot(t)
	reg := newRegistry(t)
	reg.push(t, "test/app:1", fixture.ImageOf(t, testConfig, baseLayer(t), upperLayer(t)))
	root := t.TempDir()
	s1, err := image.Open(root, image.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ref := reg.host + "/test/app:1"
	img, err := s1.Pull(ctx(t), ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	rootfs, err := s1.PrepareRootfs("c1", img.ID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(rootfs, unix.MNT_DETACH) })

	s2, err := image.Open(root, image.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if l := s2.List(); len(l) != 1 || l[0].ID != img.ID || !slices.Equal(l[0].RepoTags, img.RepoTags) || l[0].Size != img.Size {
		t.Fatalf("List after reopen = %+v, want %+v", l, img)
	}
	if r := s2.ListRootfs(); len(r) != 1 || r[0].ContainerID != "c1" || r[0].ImageID != img.ID || !r[0].Mounted {
		t.Fatalf("ListRootfs after reopen = %+v", r)
	}
	if err := s2.Remove(ref); !errors.Is(err, image.ErrInUse) {
		t.Fatalf("Remove after reopen: %v, want ErrInUse", err)
	}

	// The reboot: the mount is gone, the dirs stay.
	if err := unix.Unmount(rootfs, 0); err != nil {
		t.Fatal(err)
	}
	s3, err := image.Open(root, image.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r := s3.ListRootfs(); len(r) != 1 || r[0].Mounted {
		t.Fatalf("ListRootfs after the mount vanished = %+v, want c1 unmounted", r)
	}
	if p, err := s3.MountRootfs("c1"); err != nil || p != rootfs {
		t.Fatalf("MountRootfs = %s, %v", p, err)
	}
	if p, err := s3.MountRootfs("c1"); err != nil || p != rootfs {
		t.Fatalf("MountRootfs of a mounted rootfs = %s, %v", p, err)
	}
	if n := len(fixture.MountsUnder(t, root)); n != 1 {
		t.Fatalf("%d mounts after two MountRootfs, want 1", n)
	}
	checkRootfs(t, rootfs)
	if err := s3.RemoveRootfs("c1"); err != nil {
		t.Fatal(err)
	}
	if err := s3.Remove(ref); err != nil {
		t.Fatal(err)
	}
	wantEmptyStore(t, s3, root)
	if m := fixture.MountsUnder(t, root); len(m) > 0 {
		t.Fatalf("mounts left: %v", m)
	}
}

// TestSharedLayers: two images on the same base layer unpack it once and
// download it once; a second pull downloads nothing; removing one image
// keeps the shared layer, removing both leaves no layer.
func TestSharedLayers(t *testing.T) {
	fixture.RequireRoot(t)
	reg := newRegistry(t)
	base := baseLayer(t)
	reg.push(t, "test/a:1", fixture.ImageOf(t, testConfig, base, upperLayer(t)))
	reg.push(t, "test/b:1", fixture.ImageOf(t, testConfig, base, fixture.LayerOf(t, fixture.File{Name: "b", Body: "b"})))
	reg.blobGets()
	s, root := newStore(t, image.Options{})
	a, b := reg.host+"/test/a:1", reg.host+"/test/b:1"

	// Both at once: the base layer is still downloaded once.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, ref := range []string{a, b} {
		wg.Go(func() { _, errs[i] = s.Pull(ctx(t), ref, nil) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	baseDigest, _ := base.Digest()
	gets := reg.blobGets()
	if gets[baseDigest.String()] != 1 {
		t.Errorf("blob downloads %v: the shared base %s was downloaded %d times, want 1", gets, baseDigest, gets[baseDigest.String()])
	}
	if l := entries(t, filepath.Join(root, "layers")); len(l) != 3 {
		t.Errorf("layers/ holds %v, want 3 layers", l)
	}
	if _, err := s.Pull(ctx(t), a, nil); err != nil {
		t.Fatal(err)
	}
	if gets := reg.blobGets(); len(gets) != 1 { // the config only
		t.Errorf("second pull downloaded %v, want only the config", gets)
	}
	if err := s.Remove(a); err != nil {
		t.Fatal(err)
	}
	imgB, err := s.Get(b)
	if err != nil {
		t.Fatal(err)
	}
	if l := entries(t, filepath.Join(root, "layers")); len(l) != 2 || !slices.Contains(l, strings.TrimPrefix(imgB.Layers[0], "sha256:")) {
		t.Errorf("after removing a, layers/ holds %v, want b's 2", l)
	}
	if err := s.Remove(b); err != nil {
		t.Fatal(err)
	}
	wantEmptyStore(t, s, root)
}
