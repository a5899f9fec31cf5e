package main

import (
	"strconv"

	"golang.org/x/sys/unix"
)

// holdMountNS opens the mount namespace of pid, the container's init, and
// returns the fd (-1 when it cannot be opened: a process already gone, an
// init in the host's namespace is just as well served without it).
//
// Why: when the last process of a mount namespace exits, the kernel tears
// the namespace down inside that exit (every mount of the rootfs unmounted,
// then an RCU grace period) before the process becomes reapable. With the
// namespace held here, the exit skips that work and the reap, and so the
// exit event, comes 0.2-0.3 ms sooner; the teardown happens when the shim
// closes the fd, after it has notified the daemon (shim.wait).
//
// pid is the shim's unreaped child (the reaper is still selective), so it
// cannot name another process.
func holdMountNS(pid int) int {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	var self, theirs unix.Stat_t
	if unix.Stat("/proc/self/ns/mnt", &self) == nil && unix.Fstat(fd, &theirs) == nil &&
		self.Ino == theirs.Ino && self.Dev == theirs.Dev {
		unix.Close(fd) // the shim's own namespace: nothing to hold
		return -1
	}
	return fd
}

// releaseMountNS closes a held namespace fd; the namespace's teardown, if
// this was its last reference, runs now in the shim.
func releaseMountNS(fd *int) {
	if *fd >= 0 {
		unix.Close(*fd)
		*fd = -1
	}
}
