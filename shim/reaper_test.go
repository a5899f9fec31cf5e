package main

import (
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestReaper runs real children (this test binary, exiting with a given
// status). It must not run in parallel with tests that start processes: its
// reaper waits for any child of the test process.
func TestReaper(t *testing.T) {
	self, null, attr := exitingChildren(t)
	r := newReaper()
	defer r.close()

	// The container process: a child the reaper did not start, as runc
	// leaves it to the shim. It exits at once.
	proc := forkExited(t, self, attr)

	// Commands started through the reaper get their own statuses.
	_, a, err := r.start(self, []string{self}, attr(7, null))
	if err != nil {
		t.Fatal(err)
	}
	_, b, err := r.start(self, []string{self}, attr(9, null))
	if err != nil {
		t.Fatal(err)
	}
	expectStatus(t, a, 7)
	expectStatus(t, b, 9)

	// Selective phase: the unclaimed child has not been reaped, so its
	// start time can still be read.
	if st := procState(proc); st != "Z" {
		t.Fatalf("unclaimed child is in state %q during the selective phase, want a zombie (Z)", st)
	}
	if _, err := startTime(proc); err != nil {
		t.Fatalf("start time of the exited child: %v", err)
	}
	exited := r.claim(proc, nil)
	r.reapAll()
	expectStatus(t, exited, 4)

	// After it, every child is reaped, even one nobody waits for.
	orphan := forkExited(t, self, attr)
	r.reap() // as on its SIGCHLD; synchronous here, so the check below is not racy
	if st := procState(orphan); st != "" {
		t.Fatalf("orphan child left in state %q after a reap", st)
	}
}

// exitingChildren returns this test binary, /dev/null (closed at the end
// of the test) and the attributes that make the binary, run as a child,
// exit at once with a given status, its stdout given.
func exitingChildren(t *testing.T) (self string, null *os.File, attr func(code int, stdout *os.File) *syscall.ProcAttr) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	null, err = os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { null.Close() })
	attr = func(code int, stdout *os.File) *syscall.ProcAttr {
		return &syscall.ProcAttr{
			Env:   append(os.Environ(), exitEnv+"="+strconv.Itoa(code)),
			Files: []uintptr{null.Fd(), stdout.Fd(), null.Fd()},
		}
	}
	return self, null, attr
}

// forkExited starts a child outside the reaper that exits with status 4 and
// returns once it is a zombie (waitid with WNOWAIT: waited for, not reaped).
func forkExited(t *testing.T, self string, attr func(int, *os.File) *syscall.ProcAttr) int {
	t.Helper()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	pid, err := syscall.ForkExec(self, []string{self}, attr(4, null))
	if err != nil {
		t.Fatal(err)
	}
	var info unix.Siginfo
	err = unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
	for err == unix.EINTR {
		err = unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
	}
	if err != nil {
		t.Fatalf("waitid %d: %v", pid, err)
	}
	return pid
}

func expectStatus(t *testing.T, ch <-chan unix.WaitStatus, want int) {
	t.Helper()
	select {
	case ws := <-ch:
		if got := shellStatus(ws); got != want {
			t.Errorf("status %d, want %d", got, want)
		}
	case <-time.After(wait):
		t.Fatalf("no status within %v (want %d)", wait, want)
	}
}

// procState is the state letter of pid, "" once it is gone.
func procState(pid int) string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	st, _ := statField(data, 3)
	return st
}

// close stops the loop (the shim's own reaper lives as long as the shim).
func (r *reaper) close() {
	signal.Stop(r.sigs)
	close(r.stop)
	<-r.done
}

// TestWatchExitReapsWithoutSIGCHLD: a child watched through its pidfd is
// reaped and its status delivered even if SIGCHLD never reaches the loop.
func TestWatchExitReapsWithoutSIGCHLD(t *testing.T) {
	r := newReaper()
	defer r.close()
	signal.Stop(r.sigs) // the loop no longer hears SIGCHLD: only the pidfd can wake a reap
	r.reapAll()
	stdin, release, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	// The child exits 5 once its stdin is closed.
	pid, exited, err := r.start("/bin/sh", []string{"sh", "-c", "read x; exit 5"},
		&syscall.ProcAttr{Files: []uintptr{stdin.Fd(), null.Fd(), null.Fd()}})
	if err != nil {
		t.Fatal(err)
	}
	r.watchExit(pid)
	release.Close()
	expectStatus(t, exited, 5)
	if st := procState(pid); st != "" {
		t.Fatalf("child left in state %q after its status was delivered", st)
	}
}

// TestClaimInspectsBeforeAnyReap: what claim's inspect reads of a child
// that has already exited is there, however busy the loop is reaping: the
// child cannot be reaped between its registration and the inspection.
func TestClaimInspectsBeforeAnyReap(t *testing.T) {
	self, _, attr := exitingChildren(t)
	r := newReaper()
	defer r.close()
	for range 20 {
		proc := forkExited(t, self, attr) // a zombie, not claimed yet
		stop := make(chan struct{})
		hammered := make(chan struct{})
		go func() { // as SIGCHLDs of other children would
			defer close(hammered)
			for {
				select {
				case <-stop:
					return
				default:
					r.reap()
				}
			}
		}()
		var start string
		var serr error
		exited := r.claim(proc, func() { start, serr = startTime(proc) })
		close(stop)
		<-hammered
		if serr != nil || start == "" {
			t.Fatalf("start time of a claimed zombie: %q, %v", start, serr)
		}
		r.reap() // the hammer may have stopped before reaping it
		expectStatus(t, exited, 4)
	}
}
