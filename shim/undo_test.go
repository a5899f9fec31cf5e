package main

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/evjournal/containerd/integration/fixture"
)

// undoShim is a shim for an exec (undo runs no runc delete) with reaper r.
func undoShim(r *reaper) *shim {
	return &shim{cfg: &processConfig{Exec: true}, reaper: r, log: &logger{}}
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
// may name another process, which undo leaves alone. The reuse is real:
// ns_last_pid makes the kernel hand the reaped pid to a stranger (retried
// when another process of the machine takes it first).
func TestUndoSparesReusedPid(t *testing.T) {
	fixture.RequireRoot(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	r := newReaper()
	defer r.close()
	attr := &syscall.ProcAttr{Env: append(os.Environ(), exitEnv+"=0"), Files: []uintptr{null.Fd(), null.Fd(), null.Fd()}}
	for attempt := 0; attempt < 50; attempt++ {
		pid, exited, err := r.start(self, []string{self}, attr)
		if err != nil {
			t.Fatal(err)
		}
		expectStatus(t, exited, 0) // reaped: the pid is free
		stranger, done := startWithPid(t, pid)
		if stranger == nil {
			continue
		}
		undoShim(r).undo(pid, errors.New("boom"))
		stranger.Process.Signal(syscall.SIGTERM)
		select {
		case ws := <-done:
			if ws.Signal() != syscall.SIGTERM {
				t.Errorf("the process now holding pid %d ended by %v, want SIGTERM (undo killed it)", pid, ws.Signal())
			}
		case <-time.After(wait):
			t.Fatalf("pid %d: the stranger did not end", pid)
		}
		return
	}
	t.Fatal("no pid could be reused in 50 attempts")
}

// startWithPid starts `sleep 60` after setting ns_last_pid so that the
// kernel gives it pid; nil if it got another one (it is killed then).
func startWithPid(t *testing.T, pid int) (*exec.Cmd, <-chan syscall.WaitStatus) {
	t.Helper()
	if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
		t.Fatalf("ns_last_pid: %v", err)
	}
	cmd := exec.Command("/bin/sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan syscall.WaitStatus, 1)
	go func() {
		cmd.Wait()
		done <- cmd.ProcessState.Sys().(syscall.WaitStatus)
	}()
	if cmd.Process.Pid != pid {
		cmd.Process.Kill()
		<-done
		return nil, nil
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	return cmd, done
}
