package runtime

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// pollFor waits up to timeout (0 = just look, <0 = forever) until fd reports
// one of the events in mask, retrying on EINTR. It returns whether it did.
func pollFor(fd int, events, mask int16, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		ms := -1
		if timeout >= 0 {
			ms = int(time.Until(deadline).Milliseconds())
			if ms < 0 {
				ms = 0
			}
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: events}}
		n, err := unix.Poll(fds, ms)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n > 0 && fds[0].Revents&mask != 0
	}
}

// hungUp reports whether the read end of a FIFO has seen its last writer go.
func hungUp(fd int, timeout time.Duration) bool {
	return pollFor(fd, unix.POLLIN, unix.POLLHUP|unix.POLLERR|unix.POLLNVAL, timeout)
}

// WaitHangup waits up to timeout for the exit FIFO read end fd to hang up,
// which happens when the process's shim has exited. Tests and tools use it
// where the daemon uses its epoll monitor.
func WaitHangup(fd int, timeout time.Duration) bool { return hungUp(fd, timeout) }

// reapPidfd waits up to timeout for the child behind pidfd to exit and then
// collects its status, so it leaves no zombie. It reports whether it reaped.
func reapPidfd(pidfd int, timeout time.Duration) bool {
	if !pollFor(pidfd, unix.POLLIN, unix.POLLIN|unix.POLLHUP, timeout) {
		return false
	}
	for {
		err := unix.Waitid(unix.P_PIDFD, pidfd, nil, unix.WEXITED|unix.WNOHANG, nil)
		if !errors.Is(err, unix.EINTR) {
			return err == nil || errors.Is(err, unix.ECHILD)
		}
	}
}
