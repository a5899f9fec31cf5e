package server

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/containerd/errdefs"
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
	rel, err := filepath.Rel(own, path)
	if err != nil || rel == ".." || filepath.IsAbs(rel) || (len(rel) > 2 && rel[:3] == "../") {
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
