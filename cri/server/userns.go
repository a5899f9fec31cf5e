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

// podDirMode is the mode of a user-namespaced pod's own dirs on the way to
// its rootfs, whose group is the pod's host root gid: root and the pod may
// pass, nobody else; no one but root may list them.
const podDirMode = 0o710

// reachableFromUserNS makes path (a rootfs) reachable by the root of a
// pod's user namespace and by no other host user. runc's init resolves the
// rootfs from inside the namespace, where the host's root is nobody: the
// dirs from own (the container's or pod's own dir) down to path's parent
// become group gid (the pod's host root gid), mode 0710. Nothing above own
// is changed: the daemon's dirs there are 0711 from its start
// (openLayout), and a dir that others cannot search refuses the pod,
// naming it.
func reachableFromUserNS(own, path string, gid uint32) error {
	own, path = filepath.Clean(own), filepath.Clean(path)
	if !strings.HasPrefix(path, own+string(filepath.Separator)) {
		return fmt.Errorf("%s is not under %s", path, own)
	}
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		if err := os.Chown(d, 0, int(gid)); err != nil {
			return err
		}
		if err := os.Chmod(d, podDirMode); err != nil {
			return err
		}
		if d == own {
			return searchableAbove(own)
		}
	}
}

// searchableAbove checks that others may search every dir above own.
func searchableAbove(own string) error {
	for d := filepath.Dir(own); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("pods with a user namespace need every directory above %s searchable by others, and %s is %v: %w",
				own, d, fi.Mode().Perm(), errdefs.ErrFailedPrecondition)
		}
		if d == "/" {
			return nil
		}
	}
}

// sandboxOwnDir is the pod's own dir above its rootfs: the pod's dir, or
// with --sandbox-image its rootfs's dir in the image store.
func (s *Server) sandboxOwnDir(p *sandboxPlan) string {
	if s.cfg.SandboxImage != "" {
		return filepath.Dir(p.rootfs)
	}
	return p.dir
}

// openLayout sets the daemon's dirs on the way to the pods' rootfs
// (--root, the CRI root and its sandboxes/) to 0711: others may search
// them (a user-namespaced pod's root must pass), none may list them. Set,
// not widened: a wider mode, or the o+x older daemons added per pod, is
// brought back to it. The image store does the same for its dirs.
func (s *Server) openLayout() error {
	for _, d := range []string{s.dataRoot(), s.cfg.Root, filepath.Join(s.cfg.Root, "sandboxes")} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return fmt.Errorf("cri: %w", err)
		}
		if err := os.Chmod(d, 0o711); err != nil {
			return fmt.Errorf("cri: %w", err)
		}
	}
	return nil
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
