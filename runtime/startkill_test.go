package runtime

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// stranger is a process of the test that a failed exec's pid file may name
// once its pid was reused. Its end tells whether someone SIGKILLed it.
type stranger struct {
	cmd  *exec.Cmd
	done chan syscall.WaitStatus
}

func startStranger(t *testing.T) *stranger {
	t.Helper()
	s := &stranger{cmd: exec.Command("sleep", "60"), done: make(chan syscall.WaitStatus, 1)}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.cmd.Wait()
		s.done <- s.cmd.ProcessState.Sys().(syscall.WaitStatus)
	}()
	t.Cleanup(func() { s.cmd.Process.Kill() })
	return s
}

// endedBy SIGTERMs the stranger (a no-op if it is dead already) and returns
// the signal it died of: SIGKILL if someone killed it before.
func (s *stranger) endedBy(t *testing.T) syscall.Signal {
	t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case ws := <-s.done:
		return ws.Signal()
	case <-time.After(5 * time.Second):
		t.Fatal("the stranger did not end within 5s")
		return 0
	}
}

// failedExec is the process of an exec whose start failed after runc wrote
// pid (and, if start is not 0, after the shim recorded its start time).
func failedExec(t *testing.T, pid int, start uint64) *Process {
	t.Helper()
	c := &Container{root: t.TempDir(), rec: containerRecord{ID: "c"}, processes: map[string]*Process{}}
	p := &Process{c: c, id: "e1", rec: processRecord{Exec: true}, exitFD: -1, controlFD: -1, shimPidfd: -1}
	if err := os.MkdirAll(p.dir(), 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, v string) {
		if err := os.WriteFile(filepath.Join(p.dir(), name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(pidFile, strconv.Itoa(pid))
	if start != 0 {
		write(startTimeFile, strconv.FormatUint(start, 10))
	}
	return p
}

// fakeShim starts argv as the shim would be started (own session, pidfd);
// its stdout is returned for the caller to read.
func fakeShim(t *testing.T, argv ...string) (*shimProc, *bufio.Reader) {
	t.Helper()
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	t.Cleanup(func() { r.Close() })
	sp, err := startProcess(argv[0], argv[1:], t.TempDir(), []*os.File{null, w, null})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sp.kill)
	return sp, bufio.NewReader(r)
}

// A failed exec start kills the process runc started only if the pid in its
// pid file can be shown to be that process: by the recorded start time, or,
// without one, by being under the shim. A pid that may have been reused by
// anyone (no start time, not under the shim; or a start time that does not
// match) is left alone.
func TestAbortStartKillsOnlyVerifiedExec(t *testing.T) {
	startOf := func(t *testing.T, pid int) uint64 {
		st, err := processStartTime(pid)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	for _, tc := range []struct {
		name     string
		start    func(t *testing.T, pid int) uint64 // what the shim recorded
		withShim bool
		want     syscall.Signal // how the stranger ends
	}{
		{"no start time, not under the shim", nil, true, syscall.SIGTERM},
		{"no start time, no shim", nil, false, syscall.SIGTERM},
		{"start time of another process", func(t *testing.T, pid int) uint64 { return startOf(t, pid) + 1 }, true, syscall.SIGTERM},
		{"its own start time", startOf, true, syscall.SIGKILL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startStranger(t)
			var start uint64
			if tc.start != nil {
				start = tc.start(t, s.cmd.Process.Pid)
			}
			p := failedExec(t, s.cmd.Process.Pid, start)
			var sp *shimProc
			if tc.withShim {
				sp, _ = fakeShim(t, "/bin/sleep", "60")
			}
			p.abortStart(context.Background(), sp)
			if got := s.endedBy(t); got != tc.want {
				t.Errorf("the process the pid file names ended by %v, want %v", got, tc.want)
			}
		})
	}
}

// Without a recorded start time, the exec under the shim (here its child,
// as runc exec -d leaves it) is killed.
func TestAbortStartKillsExecUnderShim(t *testing.T) {
	sp, out := fakeShim(t, "/bin/sh", "-c", "sleep 60 & echo $!; wait")
	line, err := out.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(line[:len(line)-1])
	if err != nil {
		t.Fatalf("child pid %q: %v", line, err)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	defer unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	failedExec(t, pid, 0).abortStart(context.Background(), sp)
	if !pollFor(fd, unix.POLLIN, unix.POLLIN|unix.POLLHUP, 5*time.Second) {
		t.Error("the exec under the shim still runs 5s after the failed start was undone")
	}
}
