package runtime

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// child starts argv as a child of the test and returns it with its start
// time and a pidfd.
func child(t *testing.T, argv ...string) (*exec.Cmd, uint64, int) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	must(t, cmd.Start())
	fd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	must(t, err)
	start, err := processStartTime(cmd.Process.Pid)
	must(t, err)
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); unix.Close(fd) })
	return cmd, start, fd
}

// awaitExit waits (bounded) until the child behind pidfd has exited; it
// stays a zombie until reaped.
func awaitExit(t *testing.T, pidfd int) {
	t.Helper()
	if !pollFor(pidfd, unix.POLLIN, unix.POLLIN, 10*time.Second) {
		t.Fatal("child did not exit")
	}
}

// TestOrphanExitZombie: the shim died and its container process has
// exited but nobody has reaped it yet: its own status is reported (it
// used to be 255, "pid now belongs to another process").
func TestOrphanExitZombie(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv []string
		kill bool
		want uint32
	}{
		{"killed", []string{"sleep", "100"}, true, 137},
		{"exited 3", []string{"sh", "-c", "exit 3"}, false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd, start, fd := child(t, tc.argv...)
			if tc.kill {
				cmd.Process.Signal(syscall.SIGKILL)
			}
			awaitExit(t, fd)
			p := &Process{id: "init", pid: cmd.Process.Pid, startTime: start, shimPidfd: -1, exitFD: -1, controlFD: -1}
			e := p.orphanExit()
			if e.status != tc.want || !strings.Contains(e.reason, "had exited") {
				t.Fatalf("orphanExit: %d (%q), want %d", e.status, e.reason, tc.want)
			}
		})
	}
}

// TestOrphanExitShimSIGKILLed: a shim this daemon reaped, killed by
// SIGKILL, whose container process is gone: 137, as v0.2.9 reported it;
// a shim that exited by itself without a status: 255.
func TestOrphanExitShimSIGKILLed(t *testing.T) {
	for _, tc := range []struct {
		name string
		kill bool
		want uint32
	}{{"SIGKILL", true, 137}, {"exit 0", false, 255}} {
		t.Run(tc.name, func(t *testing.T) {
			gone, start, _ := child(t, "true")
			must(t, gone.Wait()) // the container process: gone and reaped
			argv := []string{"true"}
			if tc.kill {
				argv = []string{"sleep", "100"}
			}
			shim, _, shimfd := child(t, argv...)
			if tc.kill {
				shim.Process.Signal(syscall.SIGKILL)
			}
			dup, err := unix.Dup(shimfd)
			must(t, err)
			p := &Process{id: "init", pid: gone.Process.Pid, startTime: start, shimPidfd: dup, exitFD: -1, controlFD: -1}
			p.reapShimLocked(10 * time.Second)
			if p.shimPidfd >= 0 {
				t.Fatal("the shim was not reaped")
			}
			if e := p.orphanExit(); e.status != tc.want || e.reason == "" {
				t.Fatalf("orphanExit: %d (%q), want %d", e.status, e.reason, tc.want)
			}
		})
	}
}
