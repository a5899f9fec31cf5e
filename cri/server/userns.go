package server

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// searchableFromUserNS makes path reachable by the root of a pod's user
// namespace. runc's init resolves the rootfs (and pivots into it) from
// inside the namespace, where the host's root is nobody: every directory
// on the way must let others search it. Directories under own (the
// daemon's) get o+x, which lists nothing: their files keep their modes.
// A directory above own that others cannot search is not the daemon's to
// change: the error names it.
func searchableFromUserNS(own, path string) error {
	own, path = filepath.Clean(own), filepath.Clean(path)
	if path != own && own != "/" && !strings.HasPrefix(path, own+string(filepath.Separator)) {
		return fmt.Errorf("%s is not under %s", path, own)
	}
	for d := path; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			if len(d) < len(own) {
				return fmt.Errorf("pods with a user namespace need every directory above %s searchable by others, and %s is %v: %w",
					own, d, fi.Mode().Perm(), errdefs.ErrFailedPrecondition)
			}
			if err := os.Chmod(d, fi.Mode().Perm()|0o001); err != nil {
				return err
			}
		}
		if d == "/" {
			return nil
		}
	}
}

// makeMountpoints creates in rootfs, from the host, the mountpoint of each
// of spec's mounts that is missing: for a pod with a user namespace whose
// sandbox runs an image, runc cannot make them from inside where the
// image's directories (/etc) belong to the host's root. A file is made for
// a bind mount of a file, a directory otherwise. The paths are resolved
// within rootfs (os.Root): a symlink of the image that leaves it is an
// error, never followed onto the host.
func makeMountpoints(rootfs string, spec *specs.Spec) error {
	root, err := os.OpenRoot(rootfs)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, m := range spec.Mounts {
		dst := strings.TrimPrefix(filepath.Clean(m.Destination), "/")
		if dst == "" || dst == "." {
			continue
		}
		if _, err := root.Lstat(dst); err == nil {
			continue
		}
		file := false
		if m.Type == "bind" || slices.Contains(m.Options, "bind") || slices.Contains(m.Options, "rbind") {
			if fi, err := os.Stat(m.Source); err == nil && !fi.IsDir() {
				file = true
			}
		}
		dir := dst
		if file {
			dir = filepath.Dir(dst)
		}
		if dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("mountpoint %s in the sandbox's rootfs: %w", m.Destination, err)
			}
		}
		if file {
			f, err := root.OpenFile(dst, os.O_RDONLY|os.O_CREATE, 0o644)
			if err != nil {
				return fmt.Errorf("mountpoint %s in the sandbox's rootfs: %w", m.Destination, err)
			}
			f.Close()
		}
	}
	return nil
}
