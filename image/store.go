package image

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/internal/atomicfile"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sirupsen/logrus"
)

// Options configure a Store. The zero value pulls from the registry named in
// each reference, over https (plain http only for loopback addresses, which
// go-containerregistry allows on its own).
type Options struct {
	// Mirrors maps a registry host ("registry.k8s.io", "docker.io") to
	// endpoints ("http://127.0.0.1:5000") tried in order, with the same
	// repository path and tag, before the host itself. An http:// endpoint
	// is reached over plain http.
	Mirrors map[string][]string
	// Insecure lists registry hosts ("host:port") reached over plain http.
	Insecure []string
	// HostsDir is a registry hosts dir in containerd's hosts.toml format
	// (hosts.go): per registry host its mirrors, their capabilities and
	// TLS settings. A host configured there is not configured by Mirrors
	// and Insecure; empty: none.
	HostsDir string
	// Logger defaults to logrus.StandardLogger().
	Logger *logrus.Entry
	// Limits bound what a pull may cost; zero fields take DefaultLimits.
	Limits Limits
}

// Image is one image of the store.
type Image struct {
	// ID is the digest of the image's config, "sha256:<hex>".
	ID string `json:"id"`
	// RepoTags are the normalized tagged names pulled to this image
	// ("docker.io/library/busybox:1.29"); a tag names one image at a time.
	RepoTags []string `json:"repoTags,omitempty"`
	// RepoDigests are "<repository>@<manifest digest>" names; the digest is
	// the one the registry served for the reference (an index's digest
	// when the reference named an index).
	RepoDigests []string `json:"repoDigests,omitempty"`
	// Size is the unpacked size in bytes: the sum of the sizes of the
	// regular files of the image's layers (the apparent size, as `du -b`
	// counts it), not the compressed download size. Layers shared with
	// other images are counted in each.
	Size uint64 `json:"size"`
	// Config is the OCI config: User, Env, Entrypoint, Cmd, WorkingDir...
	Config ocispec.ImageConfig `json:"config"`
	// Layers are the chain ids of the image's layers, base layer first.
	Layers []string `json:"layers"`
}

// Store is an image store under one root directory.
type Store struct {
	root   string
	mirror map[string][]string
	insec  map[string]bool
	// hostsDir is Options.HostsDir, read at each pull.
	hostsDir string
	// tmu guards transports, the connection pools of hosts with TLS
	// settings of their own, by settings (see transportFor).
	tmu        sync.Mutex
	transports map[string]hostTransport
	log        *logrus.Entry
	limits     Limits
	// unpackSlots holds a token per layer being decompressed, daemon-wide
	// (maxConcurrentUnpacks).
	unpackSlots chan struct{}

	mu sync.Mutex // guards the maps below and the files they mirror
	// images by ID.
	images map[string]*Image
	// names maps each RepoTag and RepoDigest to an image ID.
	names map[string]string
	// layers holds the records of the layers present under layers/.
	layers map[string]layerRecord
	// rootfs holds the prepared rootfs, by container id; an entry exists
	// from the start of PrepareRootfs to the end of RemoveRootfs.
	rootfs map[string]rootfsRecord
	// pinned counts the pulls relying on a chain id, so that a Remove
	// running beside a Pull does not collect a layer the pull just found.
	pinned map[string]int
	// unpacking holds the layer unpacks in progress, so that two pulls
	// sharing a layer download it once.
	unpacking map[string]*unpackCall
}

// Open opens (creating it if needed) the store under root. It empties
// root/tmp, loads the image, layer and rootfs records, and removes the layers
// no image references (a pull cut short by a crash). It does not remount
// rootfs: see MountRootfs.
func Open(root string, opts Options) (*Store, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	s := &Store{
		root: root, mirror: opts.Mirrors, insec: map[string]bool{}, hostsDir: opts.HostsDir, transports: map[string]hostTransport{}, log: opts.Logger,
		limits: opts.Limits.withDefaults(), unpackSlots: make(chan struct{}, maxConcurrentUnpacks()),
		images: map[string]*Image{}, names: map[string]string{}, layers: map[string]layerRecord{},
		rootfs: map[string]rootfsRecord{}, pinned: map[string]int{}, unpacking: map[string]*unpackCall{},
	}
	if s.log == nil {
		s.log = logrus.NewEntry(logrus.StandardLogger())
	}
	for _, h := range opts.Insecure {
		s.insec[h] = true
	}
	if s.hostsDir != "" {
		for _, err := range checkHostsDir(s.hostsDir) {
			s.log.WithError(err).Warn("image store: registry hosts: the pulls of this registry fail until it is fixed")
		}
	}
	if err := s.mkdirs(); err != nil {
		return nil, fmt.Errorf("image store %s: %w", root, err)
	}
	if err := s.load(); err != nil {
		return nil, fmt.Errorf("image store %s: %w", root, err)
	}
	s.mu.Lock()
	doomed := s.collectLocked()
	s.mu.Unlock()
	removeAll(s.log, doomed)
	return s, nil
}

func (s *Store) imagesDir() string     { return filepath.Join(s.root, "images") }
func (s *Store) layersDir() string     { return filepath.Join(s.root, "layers") }
func (s *Store) containersDir() string { return filepath.Join(s.root, "containers") }
func (s *Store) tmpDir() string        { return filepath.Join(s.root, "tmp") }

func (s *Store) imagePath(id string) string {
	return filepath.Join(s.imagesDir(), strings.TrimPrefix(id, "sha256:")+".json")
}

// mkdirs makes the store's dirs and empties tmp: what is there was being
// downloaded, unpacked or removed when the daemon stopped.
func (s *Store) mkdirs() error {
	if err := os.RemoveAll(s.tmpDir()); err != nil {
		return err
	}
	for _, d := range []string{s.imagesDir(), s.layersDir(), s.containersDir(), s.tmpDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	return s.openLayout()
}

func (s *Store) load() error {
	if err := s.loadLayers(); err != nil {
		return err
	}
	if err := s.loadImages(); err != nil {
		return err
	}
	s.dropIncomplete()
	return s.loadRootfs()
}

func (s *Store) loadImages() error {
	entries, err := os.ReadDir(s.imagesDir())
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := filepath.Join(s.imagesDir(), e.Name())
		var img Image
		if err := readJSON(path, &img); err != nil {
			s.setAside(path, err)
			continue
		}
		s.addLocked(&img)
	}
	return nil
}

// setAside renames an unreadable record out of the way, keeping it for a
// human to look at, rather than failing the whole store or deleting it.
func (s *Store) setAside(path string, why error) {
	s.log.WithError(why).WithField("path", path).Warn("image store: unreadable record set aside")
	if err := os.Rename(path, path+".bad"); err != nil {
		s.log.WithError(err).WithField("path", path).Warn("image store: cannot set the record aside")
	}
}

// addLocked indexes img; a name already held by another image moves to img.
func (s *Store) addLocked(img *Image) {
	s.images[img.ID] = img
	for _, n := range slices.Concat(img.RepoTags, img.RepoDigests) {
		s.names[n] = img.ID
	}
}

// List returns every image, sorted by ID.
func (s *Store) List() []Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Image, 0, len(s.images))
	for _, img := range s.images {
		out = append(out, img.clone())
	}
	slices.SortFunc(out, func(a, b Image) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Get returns the image named by refOrID: a full ID ("sha256:<hex>" or the
// bare hex), a reference in any form that normalizes to a RepoTag or
// RepoDigest ("busybox:1.29", "docker.io/library/busybox:1.29",
// "repo@sha256:..."), or an unambiguous prefix of the ID's hex.
func (s *Store) Get(refOrID string) (Image, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	img, err := s.resolveLocked(refOrID)
	if err != nil {
		return Image{}, err
	}
	return img.clone(), nil
}

func (s *Store) resolveLocked(refOrID string) (*Image, error) {
	if img := s.images[refOrID]; img != nil {
		return img, nil
	}
	if img := s.images["sha256:"+refOrID]; img != nil {
		return img, nil
	}
	if r, err := parseRef(refOrID); err == nil {
		if id, ok := s.names[r.canonical]; ok {
			return s.images[id], nil
		}
	}
	if hex := strings.TrimPrefix(refOrID, "sha256:"); isHex(hex) {
		return s.byPrefixLocked(refOrID, hex)
	}
	return nil, fmt.Errorf("image %q: %w", refOrID, errdefs.ErrNotFound)
}

func (s *Store) byPrefixLocked(refOrID, hex string) (*Image, error) {
	var found []*Image
	for id, img := range s.images {
		if strings.HasPrefix(id, "sha256:"+hex) {
			found = append(found, img)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return nil, fmt.Errorf("image %q: %w", refOrID, errdefs.ErrNotFound)
	}
	return nil, fmt.Errorf("image %q: the short ID matches %d images: %w", refOrID, len(found), errdefs.ErrInvalidArgument)
}

func isHex(s string) bool {
	return s != "" && len(s) <= 64 && strings.Trim(s, "0123456789abcdef") == ""
}

// ErrInUse is the class of a Remove refused because a container's rootfs
// was prepared from the image; it matches errdefs.ErrFailedPrecondition too.
var ErrInUse = fmt.Errorf("image in use: %w", errdefs.ErrFailedPrecondition)

// Remove removes the image named by refOrID with all its names (as CRI's
// RemoveImage does), then the layers no other image uses. It is refused
// with ErrInUse while a rootfs prepared from the image exists.
func (s *Store) Remove(refOrID string) error {
	s.mu.Lock()
	img, err := s.resolveLocked(refOrID)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	if users := s.usersLocked(img.ID); len(users) > 0 {
		s.mu.Unlock()
		return fmt.Errorf("remove image %q (%s): used by the rootfs of container %s: %w", refOrID, img.ID, strings.Join(users, ", "), ErrInUse)
	}
	if err := s.deleteRecordLocked(img); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("remove image %q (%s): %w", refOrID, img.ID, err)
	}
	doomed := s.collectLocked()
	s.mu.Unlock()
	removeAll(s.log, doomed)
	return nil
}

func (s *Store) usersLocked(id string) []string {
	var users []string
	for cid, r := range s.rootfs {
		if r.ImageID == id {
			users = append(users, cid)
		}
	}
	slices.Sort(users)
	return users
}

func (s *Store) deleteRecordLocked(img *Image) error {
	if err := os.Remove(s.imagePath(img.ID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := atomicfile.SyncDir(s.imagesDir()); err != nil {
		return err
	}
	s.forgetLocked(img)
	return nil
}

// forgetLocked takes img and its names out of the index.
func (s *Store) forgetLocked(img *Image) {
	delete(s.images, img.ID)
	for n, id := range s.names {
		if id == img.ID {
			delete(s.names, n)
		}
	}
}

// collectLocked takes the layers that no image, rootfs or pull in progress
// uses out of layers/ (a rename into tmp, so they vanish at once) and
// returns the paths for removeAll, which runs without the lock.
func (s *Store) collectLocked() []string {
	used := map[string]bool{}
	for _, img := range s.images {
		for _, l := range img.Layers {
			used[l] = true
		}
	}
	for _, r := range s.rootfs {
		for _, l := range r.Layers {
			used[l] = true
		}
	}
	var doomed []string
	for chain := range s.layers {
		if used[chain] || s.pinned[chain] > 0 {
			continue
		}
		if p, err := s.retire(s.layerDir(chain)); err != nil {
			s.log.WithError(err).WithField("layer", chain).Warn("image store: cannot remove an unused layer")
			continue
		} else if p != "" {
			doomed = append(doomed, p)
		}
		delete(s.layers, chain)
	}
	return doomed
}

// retire moves dir into tmp whole (atomicfile.RetireDir): the slow removal
// of its content follows, and a crash during it is finished by Open.
func (s *Store) retire(dir string) (string, error) {
	return atomicfile.RetireDir(dir, s.tmpDir())
}

func removeAll(log *logrus.Entry, paths []string) {
	for _, p := range paths {
		if err := os.RemoveAll(p); err != nil {
			log.WithError(err).WithField("path", p).Warn("image store: removal left files behind (Open removes them)")
		}
	}
}

func (img *Image) clone() Image {
	c := *img
	c.RepoTags = slices.Clone(img.RepoTags)
	c.RepoDigests = slices.Clone(img.RepoDigests)
	c.Layers = slices.Clone(img.Layers)
	c.Config.Env = slices.Clone(img.Config.Env)
	c.Config.Entrypoint = slices.Clone(img.Config.Entrypoint)
	c.Config.Cmd = slices.Clone(img.Config.Cmd)
	c.Config.Labels = maps.Clone(img.Config.Labels)
	c.Config.ExposedPorts = maps.Clone(img.Config.ExposedPorts)
	c.Config.Volumes = maps.Clone(img.Config.Volumes)
	return c
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, b, 0o600)
}
