package runtime

import (
	"os/exec"
	goruntime "runtime"
	"syscall"
	"time"

	gorunc "github.com/containerd/go-runc"

	"github.com/evjournal/containerd/internal/pidfdwait"
)

// go-runc waits for each runc it runs in a goroutine blocked in waitid(2).
// A goroutine in a blocking syscall keeps its P until sysmon takes it back,
// which, in a daemon that was quiet, can be 10 ms later; whatever was
// queued on that P waits as long. An execution trace under load showed it
// on the exit path: the `runc delete` after an exit held a P for 5.5 ms
// while the subscriber's goroutine, readied by the exit's publication just
// before, sat in that P's queue (exit_event_p99_under_state_load_ms). So the
// daemon's runc calls are waited for through the netpoller instead: the
// goroutine parks on the runc process's pidfd (internal/pidfdwait) and
// calls Wait only once it exited.
func init() { gorunc.Monitor = netpollMonitor{} }

type netpollMonitor struct{}

func (netpollMonitor) Start(c *exec.Cmd) (chan gorunc.Exit, error) {
	if err := c.Start(); err != nil {
		return nil, err
	}
	ec := make(chan gorunc.Exit, 1)
	go func() { ec <- waitCmd(c); close(ec) }()
	return ec, nil
}

// StartLocked keeps the starting thread (Pdeathsig is sent when it exits)
// locked until runc exited, as go-runc's own monitor does.
func (netpollMonitor) StartLocked(c *exec.Cmd) (chan gorunc.Exit, error) {
	started := make(chan error)
	ec := make(chan gorunc.Exit, 1)
	go func() {
		goruntime.LockOSThread()
		defer goruntime.UnlockOSThread()
		if err := c.Start(); err != nil {
			started <- err
			return
		}
		close(started)
		ec <- waitCmd(c)
		close(ec)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return ec, nil
}

func (netpollMonitor) Wait(_ *exec.Cmd, ec chan gorunc.Exit) (int, error) {
	e := <-ec
	return e.Status, nil
}

// waitCmd waits for c's process, started, and returns its exit as go-runc
// reports it (255 when it has no status of its own).
func waitCmd(c *exec.Cmd) gorunc.Exit {
	parkUntilExited(c.Process.Pid)
	status := 0
	if err := c.Wait(); err != nil {
		status = 255
		if ee, ok := err.(*exec.ExitError); ok {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok {
				status = ws.ExitStatus()
			}
		}
	}
	return gorunc.Exit{Timestamp: time.Now(), Pid: c.Process.Pid, Status: status}
}

// parkUntilExited parks the calling goroutine until child pid (not waited
// for yet, so the pid is still its own) has exited. When no pidfd can be
// had it returns at once, and Wait blocks as before.
func parkUntilExited(pid int) {
	if w, err := pidfdwait.Open(pid); err == nil {
		w.Wait()
	}
}
