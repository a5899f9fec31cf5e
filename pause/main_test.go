package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The test binary doubles as the processes the tests put in pause's PID
// namespace, chosen by this variable.
const helperEnv = "PAUSE_TEST_HELPER"

// pauseBin is the binary under test: $PAUSE, or one built for this run.
var pauseBin string

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "block": // wait for stdin to close, then exit
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	case "orphan": // start a "block" child and leave it behind
		c := exec.Command(os.Args[0])
		c.Env = append(os.Environ(), helperEnv+"=block")
		c.Stdin = os.Stdin
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	pauseBin = os.Getenv("PAUSE")
	if pauseBin == "" {
		dir, err := os.MkdirTemp("", "pause-test")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		pauseBin = filepath.Join(dir, "pause")
		// As the Makefile builds it.
		build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", pauseBin, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build pause: %v\n%s", err, out)
			return 1
		}
	}
	return m.Run()
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("needs root (a new PID namespace)")
	}
	t.Skip("needs root (a new PID namespace)")
}

// startPause runs pause as PID 1 of a new PID namespace and returns once
// it handles signals: a stop signal sent earlier would be lost (the kernel
// drops signals to a namespace's init that has no handler) or end it with
// the Go runtime's status 2. pause reaps only after its handlers are in
// place, so an orphan seen reaped is the sign.
func startPause(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := startPauseUnsynced(t)
	reapOne(t, cmd.Process.Pid)
	return cmd
}

func startPauseUnsynced(t *testing.T) *exec.Cmd {
	t.Helper()
	needRoot(t)
	cmd := exec.Command(pauseBin)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWPID}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd
}

// stopPause sends sig and wants a prompt exit with status 0.
func stopPause(t *testing.T, cmd *exec.Cmd, sig os.Signal) {
	t.Helper()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("pause after %v: %v (want exit status 0)", sig, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("pause still running 10s after %v", sig)
	}
}

func TestStopSignals(t *testing.T) {
	for _, sig := range []os.Signal{unix.SIGTERM, unix.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			stopPause(t, startPause(t), sig)
		})
	}
}

// TestIgnoresOtherSignals: signals that end a Go program by default do not
// end pause; the SIGTERM after them still finds it running (signals from
// one sender are delivered in order).
func TestIgnoresOtherSignals(t *testing.T) {
	cmd := startPause(t)
	for _, sig := range []os.Signal{unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGPIPE, unix.SIGALRM} {
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
	}
	stopPause(t, cmd, unix.SIGTERM)
}

// TestReapsOrphans leaves processes behind in pause's namespace, lets each
// exit and waits until it is reaped, not merely a zombie. (startPause has
// done it once already.)
func TestReapsOrphans(t *testing.T) {
	cmd := startPause(t)
	for range 3 {
		reapOne(t, cmd.Process.Pid)
	}
	stopPause(t, cmd, unix.SIGTERM)
}

// reapOne makes an orphan in the namespace of pause, lets it exit and
// waits until pause has reaped it.
func reapOne(t *testing.T, pause int) {
	t.Helper()
	pid, release := orphanIn(t, pause)
	if ppid := parentOf(t, pid); ppid != pause {
		t.Fatalf("orphan %d has parent %d, want pause (%d)", pid, ppid, pause)
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pidfd)
	release()
	awaitReaped(t, pidfd, pid)
}

// orphanIn starts a process in the PID namespace of pid 1 = pause, whose
// parent there exits at once; it returns the orphan's host PID and a
// function that makes it exit.
func orphanIn(t *testing.T, pause int) (int, func()) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	t.Cleanup(func() { w.Close() })
	c := exec.Command(os.Args[0])
	// GORACE: a -race binary otherwise lingers a second at exit.
	c.Env = append(os.Environ(), helperEnv+"=orphan", "GORACE=atexit_sleep_ms=0")
	c.Stdin, c.Stderr = r, os.Stderr
	if err := startInPIDNS(c, pause); err != nil {
		t.Fatal(err)
	}
	// Once the middle process is waited for, its child has been moved to
	// the namespace's init: the kernel does that before reporting the exit.
	if err := c.Wait(); err != nil {
		t.Fatalf("orphan helper: %v", err)
	}
	kids := childrenOf(t, pause)
	if len(kids) != 1 {
		t.Fatalf("pause has children %v, want the orphan", kids)
	}
	return kids[0], func() { w.Close() }
}

// startInPIDNS starts c as a child in the PID namespace of pid. setns
// changes where the calling thread's children go, so it is done on a
// locked thread that then ends with its goroutine.
func startInPIDNS(c *exec.Cmd, pid int) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/pid", pid))
		if err != nil {
			done <- err
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWPID); err != nil {
			done <- fmt.Errorf("setns: %w", err)
			return
		}
		done <- c.Start()
	}()
	return <-done
}

// childrenOf lists the host PIDs of pid's children, from every thread.
func childrenOf(t *testing.T, pid int) []int {
	t.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	var kids []int
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
		if err != nil {
			continue // the thread ended
		}
		for _, f := range strings.Fields(string(b)) {
			n, _ := strconv.Atoi(f)
			kids = append(kids, n)
		}
	}
	return kids
}

func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command name, which is in parentheses.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// awaitReaped waits until the process is gone from /proc, reaped and not
// merely a zombie. The pidfd wakes the wait the moment the process is
// reaped (POLLHUP, Linux 6.9 and later); on older kernels poll only times
// out, and the wait falls back to looking at /proc every 100ms.
func awaitReaped(t *testing.T, pidfd, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); errors.Is(err, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			t.Fatalf("orphan %d not reaped after 10s: %s", pid, b)
		}
		fds := []unix.PollFd{{Fd: int32(pidfd)}} // no events asked: POLLHUP only
		if _, err := unix.Poll(fds, 100); err != nil && !errors.Is(err, unix.EINTR) {
			t.Fatal(err)
		}
	}
}
