package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/specs"
)

// These tests run real containers through the shim binary and the pinned
// runc, each with its own runc root, started as the daemon would start them.

// TestExitStatus: the status in exitStatus, in the shell's convention, is
// there when the exit fifo hangs up, for a plain exit and for signals.
func TestExitStatus(t *testing.T) {
	fixture.RequireRoot(t)
	t.Parallel()
	for _, tc := range []struct {
		name   string
		steps  []string
		signal string // sent with `runc kill` once running
		noPID  bool   // no pid namespace (see below)
		want   int
	}{
		{name: "exit 0", steps: []string{"exit", "0"}, want: 0},
		{name: "exit 3", steps: []string{"exit", "3"}, want: 3},
		{name: "SIGKILL", steps: []string{"sleep", "1h"}, signal: "KILL", want: 137},
		// The init of a pid namespace does not die of a signal it has no
		// handler for, and Go's default SIGTERM handler re-raises: outside
		// one, the process dies of the SIGTERM.
		{name: "SIGTERM", steps: []string{"sleep", "1h"}, signal: "TERM", noPID: true, want: 143},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newContainer(t, fixture.Args(tc.steps...))
			if tc.noPID {
				dropNamespace(c, "pid")
				c.bundle.Write(t)
			}
			defer c.remove(t)
			p := c.startShim(t, procOpts{})
			p.started()
			c.mustRunc(t, "start", c.id)
			if tc.signal != "" {
				c.mustRunc(t, "kill", c.id, tc.signal)
			}
			if got := p.exited(); got != tc.want {
				t.Fatalf("exitStatus %d, want %d", got, tc.want)
			}
		})
	}
}

func dropNamespace(c *container, typ string) {
	var keep []specs.LinuxNamespace
	for _, ns := range c.bundle.Spec.Linux.Namespaces {
		if string(ns.Type) != typ {
			keep = append(keep, ns)
		}
	}
	c.bundle.Spec.Linux.Namespaces = keep
}

// TestOutputs: stdout and stderr reach their FIFOs, all of it, before the
// shim exits.
func TestOutputs(t *testing.T) {
	fixture.RequireRoot(t)
	t.Parallel()
	c := newContainer(t, fixture.Args("echo", "to stdout", "--", "stderr", "to stderr", "--", "exit", "0"))
	defer c.remove(t)
	p := c.startShim(t, procOpts{stdout: true, stderr: true})
	p.started()
	c.mustRunc(t, "start", c.id)
	if got := p.exited(); got != 0 {
		t.Fatalf("exitStatus %d, want 0", got)
	}
	if out := readAll(t, p.stdout); out != "to stdout\n" {
		t.Errorf("stdout %q", out)
	}
	if out := readAll(t, p.stderr); out != "to stderr\n" {
		t.Errorf("stderr %q", out)
	}
}

// TestExitStatusBeforeOutput: the exit is reported (exitStatus, then the
// status line and hang-up of the exit fifo) as soon as the process is
// reaped, while its output still waits for a client that has not read it;
// the shim then stays to hand over that output, all of it, to a client that
// reads within the drain limit.
func TestExitStatusBeforeOutput(t *testing.T) {
	fixture.RequireRoot(t)
	t.Parallel()
	c := newContainer(t, fixture.Args("cat"))
	defer c.remove(t)
	p := c.startShim(t, procOpts{stdin: true, stdout: true})
	p.started()
	c.mustRunc(t, "start", c.id)
	const size = 100000    // more than the stdout FIFO holds, less than FIFO + pipe
	stdin := p.openStdin() // before close-stdin, or the process might see EOF first
	written := make(chan error, 1)
	go func() {
		_, err := stdin.WriteString(strings.Repeat("o", size))
		stdin.Close()
		written <- err
	}()
	p.control(fmt.Sprintf("%d 0 0", ctlCloseStdin))
	if got := p.notified(); got != 0 {
		t.Fatalf("exit fifo status %d, want 0", got)
	}
	if !alive(p.shimPid) {
		t.Fatal("the shim exited before its output was read")
	}
	if out := readAll(t, p.stdout); len(out) != size {
		t.Errorf("read %d bytes of output, want %d", len(out), size)
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("shim: %v; shim log: %s", err, p.read("shim-log.json"))
	}
}

// TestUnreadOutputDoesNotHoldTheExit: a process whose stdout FIFO is full
// and never read is killed: its exit is reported at once, and the shim
// drops the unread output after the drain limit instead of waiting for a
// reader for ever, saying so in its log.
func TestUnreadOutputDoesNotHoldTheExit(t *testing.T) {
	fixture.RequireRoot(t)
	t.Parallel()
	c := newContainer(t, fixture.Args("flood", "--", "sleep", "1h"))
	defer c.remove(t)
	p := c.startShim(t, procOpts{stdout: true})
	pid := p.started()
	c.mustRunc(t, "start", c.id)
	fixture.WaitBlockedWriting(t, pid, wait)
	killed := time.Now()
	c.mustRunc(t, "kill", c.id, "KILL")
	if got := p.notified(); got != 137 {
		t.Fatalf("exit fifo status %d, want 137", got)
	}
	if d := time.Since(killed); d >= drainMax {
		t.Errorf("exit reported %v after the kill: it waited for the output", d)
	}
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("shim: %v", err)
		}
	case <-time.After(drainMax + wait):
		t.Fatalf("the shim still runs %v after the exit with nobody reading its output", drainMax+wait)
	}
	if log := p.read("shim-log.json"); !strings.Contains(log, "not taken by its client") {
		t.Errorf("shim-log.json lacks the warning about dropped output: %q", log)
	}
}

// TestStdin: stdin reaches the process through its FIFO; a client closing
// its end does not end it (the shim holds it open, and a new client can
// write); close-stdin on the control fifo does.
func TestStdin(t *testing.T) {
	fixture.RequireRoot(t)
	t.Parallel()
	c := newContainer(t, fixture.Args("cat", "--", "echo", "cat done"))
	defer c.remove(t)
	p := c.startShim(t, procOpts{stdin: true, stdout: true})
	p.started()
	c.mustRunc(t, "start", c.id)
	out := newLineReader(p.stdout)
	p.writeStdin("first\n")
	out.until(t, "first")
	p.writeStdin("second\n")
	out.until(t, "second")
	p.control(fmt.Sprintf("%d 0 0", ctlCloseStdin))
	out.until(t, "cat done")
	if got := p.exited(); got != 0 {
		t.Fatalf("exitStatus %d, want 0", got)
	}
}

// TestTerminal: a terminal process sees the size sent on the control fifo,
// its output comes through the pty, and stdin goes in (the pty echoes it).
func TestTerminal(t *testing.T) {
	fixture.RequireRoot(t)
	t.Parallel()
	c := newContainer(t, fixture.Terminal(), fixture.Args("winsize"))
	defer c.remove(t)
	p := c.startShim(t, procOpts{stdin: true, stdout: true, terminal: true})
	p.started()
	c.mustRunc(t, "start", c.id)
	checkTerminal(t, p)
	c.mustRunc(t, "kill", c.id, "KILL")
	if got := p.exited(); got != 137 {
		t.Fatalf("exitStatus %d, want 137", got)
	}
}

// checkTerminal drives a process running `testinit winsize` on a pty.
func checkTerminal(t *testing.T, p *proc) {
	t.Helper()
	out := newLineReader(p.stdout)
	out.until(t, "winsize 0x0")
	p.control("not a control line")
	p.control(fmt.Sprintf("%d 100 40", ctlResize))
	out.until(t, "winsize 40x100")
	p.writeStdin("typed\n")
	out.until(t, "typed")
}

// TestExecTerminal: an exec with its own pty, resized on its own control fifo.
func TestExecTerminal(t *testing.T) {
	fixture.RequireRoot(t)
	t.Parallel()
	c := newContainer(t, fixture.Args("sleep", "1h"))
	defer c.remove(t)
	init, _ := c.runInit(t)
	spec := execProcess("winsize")
	spec.Terminal = true
	e := c.startShim(t, procOpts{name: "tty-exec", stdin: true, stdout: true, terminal: true, exec: spec})
	pid := e.started()
	checkTerminal(t, e)
	syscall.Kill(pid, syscall.SIGKILL)
	if got := e.exited(); got != 137 {
		t.Fatalf("exec exitStatus %d, want 137", got)
	}
	c.mustRunc(t, "kill", c.id, "KILL")
	if got := init.exited(); got != 137 {
		t.Fatalf("init exitStatus %d, want 137", got)
	}
}

// TestMissingExecutable: runc's own message reaches the start pipe verbatim,
// the shim exits non-zero and leaves nothing behind.
func TestMissingExecutable(t *testing.T) {
	fixture.RequireRoot(t)
	t.Parallel()
	c := newContainer(t, fixture.RawArgs("/nope"))
	defer c.remove(t)
	p := c.startShim(t, procOpts{stdout: true, stderr: true})
	pid, msg := p.startResult()
	const want = `exec: "/nope": stat /nope: no such file or directory`
	if pid != 0 || !strings.Contains(msg, want) {
		t.Fatalf("start pipe: pid %d, error %q; want an error holding %q", pid, msg, want)
	}
	if !p.hungUp(wait) {
		t.Fatal("exit fifo did not hang up after a failed start")
	}
	var ee *exec.ExitError
	if err := p.cmd.Wait(); !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("shim exited with %v, want a non-zero status", err)
	}
	if _, err := os.Stat(p.path("exitStatus")); err == nil {
		t.Error("exitStatus written although no process ran")
	}
	if st := c.status(t); st != "" {
		t.Errorf("container left behind in state %q", st)
	}
	if log := p.read("shim-log.json"); !strings.Contains(log, `"level":"error"`) || !strings.Contains(log, `stat /nope`) {
		t.Errorf("shim-log.json lacks the error: %q", log)
	}
}

// TestSurvivesLauncherKill: the process that started the shim (the daemon)
// is SIGKILLed while the shim starts the container; the shim finishes the
// start, and it and its container live on until the container exits.
func TestSurvivesLauncherKill(t *testing.T) {
	fixture.RequireRoot(t)
	t.Parallel()
	c := newContainer(t, fixture.Args("sleep", "1h"))
	defer c.remove(t)
	var launcherPid int
	p := c.startShim(t, procOpts{launch: func(cmd *exec.Cmd) int {
		pid, lpid := launchAndKill(t, cmd)
		launcherPid = lpid
		return pid
	}})
	t.Cleanup(func() { killIfAlive(p.shimPid) })
	p.started()
	if !alive(p.shimPid) {
		t.Fatal("shim died with its launcher")
	}
	if ppid := parentOf(t, p.shimPid); ppid == launcherPid {
		t.Fatalf("shim's parent is still the dead launcher %d", ppid)
	}
	c.mustRunc(t, "start", c.id)
	if st := c.status(t); st != "running" {
		t.Fatalf("container is %q, want running", st)
	}
	if p.hungUp(0) {
		t.Fatal("exit fifo hung up while the container runs")
	}
	c.mustRunc(t, "kill", c.id, "KILL")
	if got := p.exited(); got != 137 {
		t.Fatalf("exitStatus %d, want 137", got)
	}
}

// launchAndKill starts cmd (the shim) from a launcher process, SIGKILLs the
// launcher as soon as the shim is started, and returns both pids.
func launchAndKill(t *testing.T, cmd *exec.Cmd) (shimPid, launcherPid int) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	l := exec.Command(self, cmd.Args...)
	l.Args[1] = cmd.Path
	l.Dir = cmd.Dir
	l.Env = append(os.Environ(), launcherEnv+"=1")
	l.ExtraFiles = cmd.ExtraFiles
	var stderr strings.Builder
	l.Stderr = &stderr
	out, err := l.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	line, readErr := bufio.NewReader(out).ReadString('\n')
	l.Process.Kill()
	l.Wait()
	if shimPid, err = strconv.Atoi(strings.TrimSpace(line)); err != nil {
		t.Fatalf("launcher: %q %v (read: %v): %s", line, err, readErr, stderr.String())
	}
	return shimPid, l.Process.Pid
}

func killIfAlive(pid int) {
	if alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// TestIdleRSS measures the resident memory of an idle shim holding a
// sleeping container, and checks it holds no zombie.
func TestIdleRSS(t *testing.T) {
	fixture.RequireRoot(t)
	t.Parallel()
	c := newContainer(t, fixture.Args("sleep", "1h"))
	defer c.remove(t)
	p := c.startShim(t, procOpts{stdin: true, stdout: true, stderr: true})
	p.started()
	c.mustRunc(t, "start", c.id)
	if z := fixture.Zombies(p.shimPid); len(z) > 0 {
		t.Errorf("zombies under the shim: %v", z)
	}
	rss := vmRSS(t, p.shimPid)
	t.Logf("idle shim VmRSS: %d kB (%.2f MiB)", rss, float64(rss)/1024)
	if rss > maxIdleRSS {
		t.Errorf("idle shim VmRSS %d kB, want at most %d kB", rss, maxIdleRSS)
	}
	c.mustRunc(t, "kill", c.id, "KILL")
	if got := p.exited(); got != 137 {
		t.Fatalf("exitStatus %d, want 137", got)
	}
}

// maxIdleRSS (kB) is the target for an idle shim: 3 MiB.
const maxIdleRSS = 3 * 1024

func vmRSS(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no VmRSS in /proc/pid/status")
	return 0
}
