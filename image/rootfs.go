package image

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/internal/atomicfile"
	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// rootfsRecord is containers/<id>/rootfs.json. It holds the layers as well
// as the image, so the rootfs can be remounted even if the record of the
// image were lost.
type rootfsRecord struct {
	ContainerID string   `json:"containerID"`
	ImageID     string   `json:"imageID"`
	Layers      []string `json:"layers"`
	// IDMap is set for a rootfs seen through a user namespace's mapping.
	IDMap *IDMap `json:"idmap,omitempty"`
}

// IDMap asks for a rootfs whose layers are seen through the mapping of a
// user namespace (id-mapped mounts, Linux 5.19 for overlay): a file the
// image gives to root belongs to the namespace's root. The upper dir is
// owned by the host ids of that root, so files the container makes are
// its own too.
type IDMap struct {
	// UserNS is the path of the user namespace (/proc/PID/ns/user of a
	// process in it), used only while mounting. Empty: the layers are not
	// mapped, only the upper dir is given to the root ids.
	UserNS string `json:"-"`
	// RootUID and RootGID are the host ids of the namespace's root.
	RootUID uint32 `json:"rootUID"`
	RootGID uint32 `json:"rootGID"`
}

// Rootfs is a prepared rootfs as ListRootfs reports it.
type Rootfs struct {
	ContainerID string
	ImageID     string
	Path        string // the overlay's mountpoint
	Mounted     bool   // false after a reboot, until MountRootfs
}

func (s *Store) containerDir(id string) string { return filepath.Join(s.containersDir(), id) }

// PrepareRootfs makes root/containers/<id>/{upper,work,rootfs} and mounts on
// rootfs an overlay of the image's layers (top layer first) under upper.
// The rootfs counts as a use of the image (Remove refuses it) from here to
// RemoveRootfs, across restarts of the store.
//
// The overlay's options name each layer by a path relative to root/layers
// (the mount is made from a thread chdir'd there), 68 bytes a layer, and
// must fit in one page: with the longest container id, at most 56 layers.
//
// With idmap, the upper dir belongs to its root ids and, when it names a
// user namespace, the layers are seen through it (see IDMap); such a rootfs
// cannot be mounted again by MountRootfs (the namespace is gone with its
// pod). Without a namespace (a pod's sandbox, prepared before the
// namespace exists) the layers are mounted as they are.
func (s *Store) PrepareRootfs(containerID, refOrID string, idmap ...IDMap) (string, error) {
	if err := checkID(containerID); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	img, err := s.resolveLocked(refOrID)
	if err != nil {
		return "", fmt.Errorf("prepare rootfs of %s: %w", containerID, err)
	}
	if _, ok := s.rootfs[containerID]; ok {
		return "", fmt.Errorf("prepare rootfs of %s: %w", containerID, errdefs.ErrAlreadyExists)
	}
	rec := rootfsRecord{ContainerID: containerID, ImageID: img.ID, Layers: slices.Clone(img.Layers)}
	var owner *IDMap
	if len(idmap) > 0 {
		owner = &idmap[0]
		if owner.UserNS != "" {
			rec.IDMap = owner
		}
	}
	if err := s.createRootfsLocked(rec, owner); err != nil {
		return "", fmt.Errorf("prepare rootfs of %s from image %s: %w", containerID, img.ID, err)
	}
	s.rootfs[containerID] = rec
	return s.rootfsPath(containerID), nil
}

func (s *Store) rootfsPath(id string) string { return filepath.Join(s.containerDir(id), "rootfs") }

// createRootfsLocked builds the container dir under a hidden temp name
// (removed by Open if a crash leaves it), renames it into place, then
// mounts. A failed mount removes the dir again.
func (s *Store) createRootfsLocked(rec rootfsRecord, owner *IDMap) error {
	for _, l := range rec.Layers {
		if _, ok := s.layers[l]; !ok {
			return fmt.Errorf("layer %s is missing from the store (pull the image again): %w", l, errdefs.ErrFailedPrecondition)
		}
	}
	if _, err := mountOptions(rec); err != nil {
		return err
	}
	dir := s.containerDir(rec.ContainerID)
	if _, err := os.Lstat(dir); err == nil {
		return fmt.Errorf("%s exists: %w", dir, errdefs.ErrAlreadyExists)
	}
	tmp, err := os.MkdirTemp(s.containersDir(), "."+rec.ContainerID+"-")
	if err != nil {
		return err
	}
	if err := fillContainerDir(tmp, rec); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := atomicfile.SyncDir(s.containersDir()); err != nil {
		s.discardDir(dir)
		return err
	}
	if owner != nil {
		err = os.Chown(filepath.Join(dir, "upper"), int(owner.RootUID), int(owner.RootGID))
	}
	switch {
	case err != nil:
	case rec.IDMap != nil:
		err = s.mountIDMapped(rec, owner.UserNS)
	default:
		err = s.mount(rec)
	}
	if err != nil {
		s.discardDir(dir)
		return err
	}
	return nil
}

func fillContainerDir(dir string, rec rootfsRecord) error {
	for _, d := range []string{"upper", "work", "rootfs"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	return writeJSON(filepath.Join(dir, "rootfs.json"), rec)
}

func (s *Store) discardDir(dir string) {
	if p, err := s.retire(dir); err == nil {
		removeAll(s.log, []string{p})
	}
}

// MountRootfs mounts the prepared rootfs of containerID again if it is not
// mounted (after a reboot, say) and returns its path. The store does not
// remount at Open: which containers come back is the caller's restore
// decision; ListRootfs says which rootfs are mounted.
func (s *Store) MountRootfs(containerID string) (string, error) {
	if err := checkID(containerID); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.rootfs[containerID]
	if !ok {
		return "", fmt.Errorf("rootfs of %s: %w", containerID, errdefs.ErrNotFound)
	}
	path := s.rootfsPath(containerID)
	if mounted, err := mountinfo.Mounted(path); err != nil {
		return "", fmt.Errorf("rootfs of %s: %w", containerID, err)
	} else if mounted {
		return path, nil
	}
	if rec.IDMap != nil {
		return "", fmt.Errorf("rootfs of %s is id-mapped for a user namespace that is gone: %w", containerID, errdefs.ErrFailedPrecondition)
	}
	if err := s.mount(rec); err != nil {
		return "", fmt.Errorf("remount rootfs of %s: %w", containerID, err)
	}
	return path, nil
}

// RemoveRootfs unmounts and removes the rootfs of containerID, with its
// upper dir. Removing a rootfs that does not exist succeeds. An unmount
// refused as busy is tried again for up to busyUnmountWait: a process the
// daemon forks copies its open files until its exec closes them, so a
// descriptor another goroutine had open in the rootfs a moment before
// (reading its /etc/passwd, say) can hold the mount for a moment. One that
// stays busy (a process still uses the rootfs) is ErrFailedPrecondition and
// leaves everything in place.
func (s *Store) RemoveRootfs(containerID string) error {
	if err := checkID(containerID); err != nil {
		return err
	}
	deadline := time.Now().Add(busyUnmountWait)
	for delay := time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		err := s.removeRootfs(containerID)
		if err == nil || !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(delay) // nothing tells when the mount's last user let go
	}
}

// busyUnmountWait bounds how long RemoveRootfs waits for a busy mount.
const busyUnmountWait = 3 * time.Second

func (s *Store) removeRootfs(containerID string) error {
	s.mu.Lock()
	dir := s.containerDir(containerID)
	if err := unmountAll(filepath.Join(dir, "rootfs")); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("remove rootfs of %s: %w", containerID, err)
	}
	p, err := s.retire(dir)
	if err != nil {
		s.mu.Unlock()
		return fmt.Errorf("remove rootfs of %s: %w", containerID, err)
	}
	delete(s.rootfs, containerID)
	s.mu.Unlock()
	if p != "" {
		removeAll(s.log, []string{p})
	}
	return nil
}

// ListRootfs returns the prepared rootfs, sorted by container id.
func (s *Store) ListRootfs() []Rootfs {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Rootfs, 0, len(s.rootfs))
	for id, rec := range s.rootfs {
		path := s.rootfsPath(id)
		mounted, _ := mountinfo.Mounted(path)
		out = append(out, Rootfs{ContainerID: id, ImageID: rec.ImageID, Path: path, Mounted: mounted})
	}
	slices.SortFunc(out, func(a, b Rootfs) int { return strings.Compare(a.ContainerID, b.ContainerID) })
	return out
}

// loadRootfs reads the prepared rootfs records; hidden dirs are prepares a
// crash cut short, before their mount.
func (s *Store) loadRootfs() error {
	entries, err := os.ReadDir(s.containersDir())
	if err != nil {
		return err
	}
	for _, e := range entries {
		path := filepath.Join(s.containersDir(), e.Name())
		if strings.HasPrefix(e.Name(), ".") {
			os.RemoveAll(path)
			continue
		}
		var rec rootfsRecord
		if err := readJSON(filepath.Join(path, "rootfs.json"), &rec); err != nil || rec.ContainerID != e.Name() {
			// Left in place: its rootfs may be mounted and in use.
			s.log.WithError(err).WithField("container", e.Name()).Warn("image store: unreadable rootfs record, ignored")
			continue
		}
		s.rootfs[rec.ContainerID] = rec
	}
	return nil
}

// mount mounts the overlay of rec on its rootfs dir.
func (s *Store) mount(rec rootfsRecord) error {
	data, err := mountOptions(rec)
	if err != nil {
		return err
	}
	target := s.rootfsPath(rec.ContainerID)
	if err := mountFrom(s.layersDir(), "overlay", target, "overlay", data); err != nil {
		return fmt.Errorf("mount overlay on %s (from %s, %s): %w", target, s.layersDir(), data, err)
	}
	return nil
}

// mountIDMapped mounts the overlay of rec's layers seen through the user
// namespace at userNS: each layer gets an id-mapped clone (open_tree,
// mount_setattr MOUNT_ATTR_IDMAP) attached under the container dir's
// lower/, the overlay is made of those, then they are detached again:
// overlayfs keeps private clones of its layers, so nothing is left to
// unmount but the overlay.
func (s *Store) mountIDMapped(rec rootfsRecord, userNS string) (err error) {
	if userNS == "" {
		return fmt.Errorf("an id-mapped rootfs needs the path of its user namespace: %w", errdefs.ErrInvalidArgument)
	}
	ns, err := os.Open(userNS)
	if err != nil {
		return fmt.Errorf("user namespace: %w", err)
	}
	defer ns.Close()
	dir := s.containerDir(rec.ContainerID)
	lowerDir := filepath.Join(dir, "lower")
	if err := os.Mkdir(lowerDir, 0o700); err != nil {
		return err
	}
	var attached []string
	defer func() {
		for _, t := range attached {
			if uerr := unix.Unmount(t, unix.MNT_DETACH); uerr != nil && err == nil {
				err = &os.PathError{Op: "detach id-mapped layer", Path: t, Err: uerr}
			}
		}
		if rerr := os.RemoveAll(lowerDir); rerr != nil && err == nil {
			err = rerr
		}
	}()
	lowers := make([]string, len(rec.Layers))
	for i, l := range rec.Layers {
		name := strconv.Itoa(i)
		target := filepath.Join(lowerDir, name)
		if err := os.Mkdir(target, 0o700); err != nil {
			return err
		}
		src := filepath.Join(s.layersDir(), strings.TrimPrefix(l, "sha256:"), "fs")
		if err := attachIDMapped(src, target, int(ns.Fd())); err != nil {
			return fmt.Errorf("id-mapped mount of layer %s: %w", l, err)
		}
		attached = append(attached, target)
		lowers[len(lowers)-1-i] = "lower/" + name
	}
	data := "lowerdir=" + strings.Join(lowers, ":") + ",upperdir=upper,workdir=work"
	if indexOff {
		data += ",index=off"
	}
	if limit := os.Getpagesize() - 1; len(data) > limit {
		return fmt.Errorf("%d layers need %d bytes of overlay mount options, the kernel takes %d: %w",
			len(rec.Layers), len(data), limit, errdefs.ErrInvalidArgument)
	}
	target := s.rootfsPath(rec.ContainerID)
	if err := mountFrom(dir, "overlay", target, "overlay", data); err != nil {
		return fmt.Errorf("mount overlay on %s (from %s, %s): %w", target, dir, data, err)
	}
	return nil
}

// attachIDMapped attaches at target a clone of the mount tree at src seen
// through the user namespace open as nsFD.
func attachIDMapped(src, target string, nsFD int) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return &os.PathError{Op: "open_tree", Path: src, Err: err}
	}
	defer unix.Close(fd)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(nsFD)}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return &os.PathError{Op: "mount_setattr MOUNT_ATTR_IDMAP", Path: src, Err: err}
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return &os.PathError{Op: "move_mount", Path: target, Err: err}
	}
	return nil
}

// mountOptions are the overlay options of rec, paths relative to layers/.
func mountOptions(rec rootfsRecord) (string, error) {
	if len(rec.Layers) == 0 {
		return "", fmt.Errorf("the image has no layers, overlay needs one: %w", errdefs.ErrInvalidArgument)
	}
	lowers := make([]string, len(rec.Layers))
	for i, l := range rec.Layers {
		lowers[len(lowers)-1-i] = strings.TrimPrefix(l, "sha256:") + "/fs"
	}
	c := "../containers/" + rec.ContainerID
	data := "lowerdir=" + strings.Join(lowers, ":") + ",upperdir=" + c + "/upper,workdir=" + c + "/work"
	if indexOff {
		data += ",index=off"
	}
	if limit := os.Getpagesize() - 1; len(data) > limit {
		return "", fmt.Errorf("%d layers need %d bytes of overlay mount options, the kernel takes %d: %w",
			len(rec.Layers), len(data), limit, errdefs.ErrInvalidArgument)
	}
	return data, nil
}

// indexOff: with overlay's inode index on (a kernel build or module
// option), a layer dir may back only one mount at a time; shared layers need
// it off, and the option exists only where the parameter does.
var indexOff = func() bool {
	_, err := os.Stat("/sys/module/overlay/parameters/index")
	return err == nil
}()

// mountFrom mounts with dir as the working directory, so that data can name
// paths relative to it. The chdir happens on a locked thread that first
// unshares its fs attributes (CLONE_FS): the rest of the process keeps its
// working directory. The thread is never unlocked, so it exits with the
// goroutine instead of returning to the pool with a cwd of its own.
func mountFrom(dir, source, target, fstype, data string) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		errc <- func() error {
			if err := unix.Unshare(unix.CLONE_FS); err != nil {
				return os.NewSyscallError("unshare CLONE_FS", err)
			}
			if err := unix.Chdir(dir); err != nil {
				return &os.PathError{Op: "chdir", Path: dir, Err: err}
			}
			return os.NewSyscallError("mount", unix.Mount(source, target, fstype, rootfsMountFlags, data))
		}()
	}()
	return <-errc
}

// unmountAll unmounts target until nothing is mounted there. EBUSY (a
// process still in the rootfs) is ErrFailedPrecondition.
func unmountAll(target string) error {
	for {
		err := unix.Unmount(target, 0)
		switch {
		case err == nil || errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT):
			return nil // not (or no longer) a mountpoint
		case errors.Is(err, unix.EBUSY):
			return fmt.Errorf("unmount %s: %w: %w", target, errdefs.ErrFailedPrecondition, err)
		}
		return &os.PathError{Op: "unmount", Path: target, Err: err}
	}
}

// maxIDLength matches runtime.MaxIDLength; the rules are those of
// runtime.ValidateID (not imported: this package stays free of the runtime).
const maxIDLength = 76

// checkID refuses a container id that could not be a safe dir name.
func checkID(id string) error {
	ok := id != "" && len(id) <= maxIDLength && id[0] != '.' && id[0] != '-'
	for i := 0; ok && i < len(id); i++ {
		b := id[i]
		ok = b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '.' || b == '-'
	}
	if !ok {
		return fmt.Errorf("invalid container id %q: want 1-%d bytes of [A-Za-z0-9_.-], not starting with '.' or '-': %w", id, maxIDLength, errdefs.ErrInvalidArgument)
	}
	return nil
}
