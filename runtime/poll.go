package runtime

import (
	"errors"
	"syscall"
	"time"
	"unsafe"

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
// It asks for no event: POLLHUP and POLLERR are reported anyway, and the
// status line the shim writes just before it hangs up (POLLIN) must not
// end the wait early.
func hungUp(fd int, timeout time.Duration) bool {
	return pollFor(fd, 0, unix.POLLHUP|unix.POLLERR|unix.POLLNVAL, timeout)
}

// WaitHangup waits up to timeout for the exit FIFO read end fd to hang up,
// which happens when the process's shim has exited. Tests and tools use it
// where the daemon uses its epoll monitor.
func WaitHangup(fd int, timeout time.Duration) bool { return hungUp(fd, timeout) }

// reapPidfd waits up to timeout for the child behind pidfd to exit and then
// collects its status, so it leaves no zombie. It reports whether it reaped.
func reapPidfd(pidfd int, timeout time.Duration) bool {
	reaped, _ := reapPidfdSignal(pidfd, timeout)
	return reaped
}

// reapPidfdSignal is reapPidfd that also tells which signal killed the
// child (0 when it exited, or when its status was collected elsewhere).
func reapPidfdSignal(pidfd int, timeout time.Duration) (bool, syscall.Signal) {
	if !pollFor(pidfd, unix.POLLIN, unix.POLLIN|unix.POLLHUP, timeout) {
		return false, 0
	}
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PIDFD, pidfd, &info, unix.WEXITED|unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil || errors.Is(err, unix.ECHILD), killedBy(&info)
	}
}

// childInfo is the SIGCHLD part of a siginfo_t after its signo, errno and
// code (and padding): si_pid, si_uid, si_status.
type childInfo struct {
	pid    int32
	uid    uint32
	status int32
}

// killedBy reads the signal from a waitid siginfo (CLD_KILLED or CLD_DUMPED).
func killedBy(info *unix.Siginfo) syscall.Signal {
	const cldKilled, cldDumped = 2, 3
	if info.Signo != int32(unix.SIGCHLD) || (info.Code != cldKilled && info.Code != cldDumped) {
		return 0
	}
	ci := (*childInfo)(unsafe.Pointer(uintptr(unsafe.Pointer(info)) + 16))
	return syscall.Signal(ci.status)
}
