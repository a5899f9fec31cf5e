package runtime

import (
	"errors"
	"sync"

	"golang.org/x/sys/unix"
)

// Shims report a process's exit at the reap, then may go on for a few
// seconds handing the last output to a slow client (docs/shim-contract.md).
// A Process closed meanwhile must neither wait for that (a worker would be
// held, and with it the id) nor leave its shim a zombie: its pidfd is handed
// to lateReaper, ONE goroutine that polls every such pidfd and reaps each
// shim as it exits.
var lateReaper = &pidfdReaper{}

type pidfdReaper struct {
	mu      sync.Mutex
	pidfds  []int // guarded by mu: shims not reaped yet
	wake    int   // eventfd that interrupts the poll for a new pidfd; -1 until started
	started bool  // guarded by mu
}

// add takes ownership of pidfd: the shim behind it is reaped when it exits
// and the pidfd closed.
func (r *pidfdReaper) add(pidfd int) {
	if reapPidfd(pidfd, 0) { // already gone: nothing to hand over
		unix.Close(pidfd)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started {
		fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			// Without the goroutine, wait here: a worker waits, bounded,
			// rather than a zombie stays.
			reapPidfd(pidfd, shimReapTimeout)
			unix.Close(pidfd)
			return
		}
		r.wake, r.started = fd, true
		go r.run()
	}
	r.pidfds = append(r.pidfds, pidfd)
	var one = [8]byte{1}
	unix.Write(r.wake, one[:])
}

// run polls the wake eventfd and every pidfd; each readable pidfd is a shim
// that exited: reaped, closed, dropped from the list.
func (r *pidfdReaper) run() {
	for {
		r.mu.Lock()
		fds := make([]unix.PollFd, 0, len(r.pidfds)+1)
		fds = append(fds, unix.PollFd{Fd: int32(r.wake), Events: unix.POLLIN})
		for _, fd := range r.pidfds {
			fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
		}
		r.mu.Unlock()
		if _, err := unix.Poll(fds, -1); err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		if fds[0].Revents != 0 {
			var buf [8]byte
			unix.Read(r.wake, buf[:])
		}
		for _, f := range fds[1:] {
			if f.Revents != 0 {
				r.reap(int(f.Fd))
			}
		}
	}
}

// reap collects the exited shim behind pidfd and forgets it.
func (r *pidfdReaper) reap(pidfd int) {
	reapPidfd(pidfd, 0)
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, fd := range r.pidfds {
		if fd == pidfd {
			r.pidfds = append(r.pidfds[:i], r.pidfds[i+1:]...)
			unix.Close(pidfd)
			return
		}
	}
}
