// Package pidfdwait parks a goroutine until a child process exits, on the
// child's pidfd in Go's netpoller, instead of in a blocking wait4/waitid.
//
// A goroutine blocked in a syscall keeps its thread and, until sysmon takes
// it back (up to 10 ms in a program that was quiet), its P: goroutines
// queued on that P wait as long. And a waiter woken by SIGCHLD goes through
// the signal handler and os/signal's goroutine first. A pidfd in the
// netpoller wakes the thread already in epoll_wait, once. The daemon waits
// for runc this way (runtime/runcwait.go), the shim for its container
// process (shim/reaper.go); see bench/README.md for the measurements.
package pidfdwait

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Waiter is an open pidfd of one process.
type Waiter struct {
	f  *os.File
	rc syscall.RawConn
}

// Open opens a pidfd of pid. pid must not be reapable meanwhile (a child
// not waited for yet), or the number may name another process.
func Open(pid int) (*Waiter, error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Waiter{f: f, rc: rc}, nil
}

// Wait parks the calling goroutine until the process has exited, then
// closes the pidfd. It does not reap the process.
func (w *Waiter) Wait() {
	defer w.f.Close()
	w.rc.Read(func(fd uintptr) bool { return exited(int(fd)) })
}

// exited says whether the pidfd reports its process's exit (readable).
func exited(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0 && fds[0].Revents&(unix.POLLIN|unix.POLLHUP) != 0
	}
}
