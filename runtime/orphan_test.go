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
// SIGKILL, gives 137 whatever became of its container process (gone, a
// zombie with a status of its own, as a process dead of SIGPIPE on the
// shim's pipes is, or still running, then killed), as v0.2.9 reported it;
// a shim that exited by itself without a status: 255, or the zombie's own.
func TestOrphanExitShimSIGKILLed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		process  string // gone, zombie (exited 3) or alive
		shimKill bool
		want     uint32
	}{
		{"SIGKILL, process gone", "gone", true, 137},
		{"SIGKILL, process exited 3", "zombie", true, 137},
		{"SIGKILL, process alive", "alive", true, 137},
		{"exit 0, process gone", "gone", false, 255},
		{"exit 0, process exited 3", "zombie", false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proc, start, procfd := orphan(t, tc.process)
			p := &Process{id: "init", pid: proc.Process.Pid, startTime: start, shimPidfd: reapedShim(t, tc.shimKill), exitFD: -1, controlFD: -1}
			p.reapShimLocked(10 * time.Second)
			if p.shimPidfd >= 0 {
				t.Fatal("the shim was not reaped")
			}
			if e := p.orphanExit(); e.status != tc.want || e.reason == "" {
				t.Fatalf("orphanExit: %d (%q), want %d", e.status, e.reason, tc.want)
			}
			if tc.process == "alive" {
				awaitExit(t, procfd) // killed by orphanExit
			}
		})
	}
}

// orphan is the container process of TestOrphanExitShimSIGKILLed: gone
// (exited and reaped), a zombie that exited 3, or alive.
func orphan(t *testing.T, kind string) (*exec.Cmd, uint64, int) {
	t.Helper()
	switch kind {
	case "gone":
		cmd, start, fd := child(t, "true")
		must(t, cmd.Wait())
		return cmd, start, fd
	case "zombie":
		cmd, start, fd := child(t, "sh", "-c", "exit 3")
		awaitExit(t, fd)
		return cmd, start, fd
	}
	return child(t, "sleep", "100")
}

// reapedShim is a dup of the pidfd of a stand-in shim: SIGKILLed, or one
// that exits 0 by itself.
func reapedShim(t *testing.T, kill bool) int {
	t.Helper()
	argv := []string{"true"}
	if kill {
		argv = []string{"sleep", "100"}
	}
	shim, _, shimfd := child(t, argv...)
	if kill {
		shim.Process.Signal(syscall.SIGKILL)
	}
	dup, err := unix.Dup(shimfd)
	must(t, err)
	return dup
}
