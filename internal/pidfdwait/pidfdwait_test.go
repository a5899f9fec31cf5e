package pidfdwait

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestWaitReturnsAtTheExit: Wait returns once the child exited (and not
// before: the child waits for its stdin to close), and leaves it unreaped.
func TestWaitReturnsAtTheExit(t *testing.T) {
	stdin, release, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	cmd := exec.Command("/bin/sh", "-c", "read x; exit 7")
	cmd.Stdin = stdin
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w, err := Open(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { w.Wait(); close(done) }()
	select {
	case <-done:
		t.Fatal("Wait returned while the child was still running")
	default:
	}
	release.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return within 10 s of the exit")
	}
	if err := cmd.Wait(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 7 {
		t.Fatalf("the child's status after Wait: %v (%v); want exit 7, not reaped by Wait", cmd.ProcessState, err)
	}
}
