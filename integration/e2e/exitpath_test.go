package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evjournal/containerd/integration/fixture"
)

// TestCtrInterruptedAttachDoesNotHoldExit: an attached `ctr
// containers start --attach` whose own stdout nobody reads is interrupted
// (Ctrl-C) while its container floods stdout; the container's output FIFO
// then stays full for good. Killing the container publishes its exit at
// once, while its shim still holds the unread output, and the id is
// reusable.
func TestCtrInterruptedAttachDoesNotHoldExit(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := fixture.UniqueID(t)
	evs := d.SubscribeAfter(time.Now(), id)

	// ctr's stdout is a pipe nobody reads: once it is full ctr stops
	// copying, the FIFO fills, and the container blocks in its writes.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	var stderr strings.Builder
	cmd := exec.Command(fixture.Ctr(t), "--address", "unix://"+d.Socket, "containers", "start", "--attach", id,
		fixture.NewBundle(t, fixture.Args("flood")).Path)
	cmd.Stdout, cmd.Stderr = w, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var ctrErr error
	ctrDone := make(chan struct{})
	go func() { ctrErr = cmd.Wait(); close(ctrDone) }()
	t.Cleanup(func() {
		select {
		case <-ctrDone:
		default:
			cmd.Process.Kill()
			<-ctrDone
		}
	})

	evs.Expect("start-container " + id)
	pid := initPid(t, d, id)
	fixture.WaitBlockedWriting(t, cmd.Process.Pid, promptly) // ctr is stuck on its stdout
	shim := shimOf(t, d, id, "init")

	// Ctrl-C: ctr ends with 128 + SIGINT; nobody reads the output now.
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctrDone:
		var ee *exec.ExitError
		if !errors.As(ctrErr, &ee) || ee.ExitCode() != 130 {
			t.Fatalf("ctr after SIGINT: %v, want exit status 130 (stderr %q)", ctrErr, stderr.String())
		}
	case <-time.After(promptly):
		t.Fatalf("ctr still running %s after SIGINT", promptly)
	}
	// Once killed, the container leaves its shim more output than the FIFO
	// has room for: the shim holds it for its whole drain bound (5 s).
	fixture.WaitBacklog(t, fdNamed(t, shim, "/stdout"), fmt.Sprintf("/proc/%d/fd/1", pid), 16<<10, promptly)
	fixture.WaitBlockedWriting(t, pid, promptly)

	start := time.Now()
	kill(t, pid, syscall.SIGKILL)
	if got := fixture.Describe(evs.Next(promptly)); got != "exit "+id+" init 137" {
		t.Fatalf("after kill -9: %q, want the exit with 137", got)
	}
	took := time.Since(start)
	if !alive(shim) {
		t.Fatalf("the exit was published %s after the kill, once the shim was gone: it waited for the unread output", took)
	}
	t.Logf("kill -9 to exit event: %s, the shim still holding the unread output", took)

	// The id is free at once; the old shim gives up the output on its own.
	create(t, d, id, fixture.NewBundle(t))
	signal(t, d, id, "init", syscall.SIGKILL)
	evs.Expect("start-container "+id, "exit "+id+" init 137")
	waitDead(t, shim)
}

// fdNamed is /proc/PID/fd/N for the one open file of pid whose path ends in
// suffix (deleted or not).
func fdNamed(t *testing.T, pid int, suffix string) string {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, _ := os.ReadDir(dir)
	var found []string
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err == nil && strings.HasSuffix(strings.TrimSuffix(target, " (deleted)"), suffix) {
			found = append(found, filepath.Join(dir, e.Name()))
		}
	}
	if len(found) != 1 {
		t.Fatalf("files of pid %d ending in %s: %v, want one", pid, suffix, found)
	}
	return found[0]
}
