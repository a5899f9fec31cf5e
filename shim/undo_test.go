package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/evjournal/containerd/integration/fixture"
)

// undoReuseEnv runs the test binary as undoReuseHelper.
const undoReuseEnv = "SHIM_TEST_UNDO_REUSE"

// undoShim is a shim for an exec (undo runs no runc delete) with reaper r.
func undoShim(r *reaper) *shim {
	return &shim{cfg: &processConfig{Exec: true}, reaper: r, log: &logger{}, mountNS: -1}
}

// TestUndoKillsUnreapedProcess: undo kills the process runc started while
// the reaper still holds it (not reaped: its pid is still its own).
func TestUndoKillsUnreapedProcess(t *testing.T) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	r := newReaper()
	defer r.close()
	pid, exited, err := r.start("/bin/sleep", []string{"sleep", "60"},
		&syscall.ProcAttr{Files: []uintptr{null.Fd(), null.Fd(), null.Fd()}})
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if got := undoShim(r).undo(pid, boom); got != boom {
		t.Errorf("undo returned %v, want its argument", got)
	}
	expectStatus(t, exited, 128+int(unix.SIGKILL))
}

// TestUndoSparesReusedPid: once the reaper has reaped the process, its pid
// may name another process, which undo leaves alone. The reuse is real: in a
// pid namespace of its own (so no other process of the machine is touched),
// the helper has the kernel hand the reaped pid to a stranger through
// ns_last_pid, then undoes; the stranger must survive.
func TestUndoSparesReusedPid(t *testing.T) {
	fixture.RequireRoot(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), undoReuseEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Logf("%s", out)
}

// undoReuseHelper is pid 1 of a new pid namespace: a child the reaper starts
// exits and is reaped, a stranger gets its pid, and undo is called with it.
// 0: the stranger survived; 1: undo killed it (or a step failed).
func undoReuseHelper() int {
	null, err := os.Open(os.DevNull)
	if err != nil {
		return fail(err)
	}
	self, err := os.Executable()
	if err != nil {
		return fail(err)
	}
	r := newReaper()
	attr := &syscall.ProcAttr{Env: append(os.Environ(), exitEnv+"=0"), Files: []uintptr{null.Fd(), null.Fd(), null.Fd()}}
	for attempt := 1; attempt <= 20; attempt++ {
		pid, exited, err := r.start(self, []string{self}, attr)
		if err != nil {
			return fail(err)
		}
		<-exited // reaped: the pid is free
		stranger, done, err := startWithPid(pid)
		if err != nil {
			return fail(err)
		}
		if stranger == nil {
			continue // a thread of ours took the pid first
		}
		undoShim(r).undo(pid, errors.New("boom"))
		stranger.Process.Signal(syscall.SIGTERM)
		select {
		case ws := <-done:
			if ws.Signal() != syscall.SIGTERM {
				return fail(fmt.Errorf("the process now holding pid %d ended by %v, want SIGTERM: undo killed it", pid, ws.Signal()))
			}
		case <-time.After(wait):
			return fail(fmt.Errorf("pid %d: the stranger did not end", pid))
		}
		fmt.Printf("pid %d reused at attempt %d; undo left it alone\n", pid, attempt)
		return 0
	}
	return fail(errors.New("no pid could be reused in 20 attempts"))
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, err)
	return 1
}

// startWithPid starts `sleep 60` after setting ns_last_pid so that the
// kernel gives it pid; nil if it got another one (it is killed then).
func startWithPid(pid int) (*exec.Cmd, <-chan syscall.WaitStatus, error) {
	if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
		return nil, nil, err
	}
	cmd := exec.Command("/bin/sleep", "60")
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	done := make(chan syscall.WaitStatus, 1)
	go func() {
		cmd.Wait()
		done <- cmd.ProcessState.Sys().(syscall.WaitStatus)
	}()
	if cmd.Process.Pid != pid {
		cmd.Process.Kill()
		<-done
		return nil, nil, nil
	}
	return cmd, done, nil
}
