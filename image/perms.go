package image

import (
	"os"

	"golang.org/x/sys/unix"
)

// What other host users may reach of the store. A container's rootfs
// (containers/<id>/rootfs) must be reachable by the root of a pod's user
// namespace, which the host sees as another user: the store's root and
// containers/ let others search them (0711: no listing), and the caller
// gives a container dir of such a pod to the pod's group (0710); every
// other container dir is root's alone (0700), as are layers/, images/ and
// tmp/. Nothing an image ships is usable through a rootfs from the host:
// its overlay is mounted nodev (a device node the image holds cannot be
// opened there). It is not mounted nosuid: runc's bind of the rootfs
// inherits the flag, and set-uid programs and file capabilities inside
// the container (sudo, ping; Kubernetes' allowPrivilegeEscalation) would
// stop working; the dir modes keep other host users out.

// rootfsMountFlags are the flags of every overlay the store mounts.
const rootfsMountFlags = unix.MS_NODEV

// layoutMode is the mode of the dirs on the way to every rootfs.
const layoutMode = 0o711

// openLayout sets the store's root and containers/ to layoutMode: set, not
// widened, so that a mode an older daemon left (o+x added to whatever it
// was) is brought back to it.
func (s *Store) openLayout() error {
	for _, d := range []string{s.root, s.containersDir()} {
		if err := os.Chmod(d, layoutMode); err != nil {
			return err
		}
	}
	return nil
}
