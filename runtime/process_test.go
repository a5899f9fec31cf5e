package runtime_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/runtime"
	"golang.org/x/sys/unix"
)

// TestSignalRefusesReusedPid: when the recorded start time no longer
// matches the pid (simulated by editing it), Signal refuses.
func TestSignalRefusesReusedPid(t *testing.T) {
	e := newEnv(t)
	c, p := e.run(t, fixture.NewBundle(t, sleeper), runtime.Stdio{})
	bumpStartTime(t, filepath.Join(c.Dir(), "init", "starttime"))
	reloaded := initOf(t, load(t, e.root, c.ID()))
	err := reloaded.Signal(syscall.SIGKILL)
	if !errdefs.IsNotFound(err) || err.Error() != "no such process" || !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("Signal with a reused pid: %v, want NotFound \"no such process\"", err)
	}
	if got := status(t, c); got != "running" {
		t.Fatalf("the process was signalled anyway: %s", got)
	}
	if err := p.Signal(syscall.SIGKILL); err != nil { // the true record still works
		t.Fatal(err)
	}
	wantStatus(t, p, 137)
	if err := p.Signal(syscall.SIGKILL); !errdefs.IsNotFound(err) {
		t.Fatalf("Signal after exit: %v, want no such process", err)
	}
}

func bumpStartTime(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strconv.FormatUint(n+1, 10)), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestShimKilled: a SIGKILLed shim leaves no exitStatus; the daemon kills
// the orphaned container process and reports 137, stably across a Load.
func TestShimKilled(t *testing.T) {
	e := newEnv(t)
	c, p := e.run(t, fixture.NewBundle(t, sleeper), runtime.Stdio{})
	procfd, err := unix.PidfdOpen(p.SystemPid(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(procfd)
	syscall.Kill(shimPid(t, c), syscall.SIGKILL)
	st, reason := waitExit(t, p)
	if st != 137 || reason == "" {
		t.Fatalf("exit status %d (%q), want 137 decided by the daemon", st, reason)
	}
	if !pollIn(procfd, waitLimit) {
		t.Fatal("the orphaned container process was not killed")
	}
	again := initOf(t, load(t, e.root, c.ID()))
	if st2, reason2 := again.ExitStatus(); st2 != st || reason2 != reason {
		t.Fatalf("after Load: %d (%q), want %d (%q)", st2, reason2, st, reason)
	}
}

// TestShimKilledPidReused: the shim is gone without a status and the pid's
// start time does not match: 255, and nothing is killed.
func TestShimKilledPidReused(t *testing.T) {
	e := newEnv(t)
	c, p := e.run(t, fixture.NewBundle(t, sleeper), runtime.Stdio{})
	bumpStartTime(t, filepath.Join(c.Dir(), "init", "starttime"))
	reloaded := initOf(t, load(t, e.root, c.ID()))
	syscall.Kill(shimPid(t, c), syscall.SIGKILL)
	st, reason := waitExit(t, reloaded)
	if st != 255 || !strings.Contains(reason, "another process") {
		t.Fatalf("exit status %d (%q), want 255 for a reused pid", st, reason)
	}
	if err := unix.Kill(p.SystemPid(), 0); err != nil {
		t.Fatalf("the process behind a reused pid was killed: %v", err)
	}
}
