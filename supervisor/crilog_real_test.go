package supervisor

// The CRI log stdio mode on real shims and runc: runtime.Stdio.LogPath
// through CreateContainer and Exec, ReopenLog through the loop, across a
// daemon restart, and an exit on a full log file system.

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"github.com/evjournal/containerd/cri/crilog"
	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/specs"
)

// awaitStdout reads the CRI log at path until its stdout stream holds want,
// and returns that stream's bytes.
func awaitStdout(t *testing.T, path, want string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := logStream(t, path, crilog.Stdout)
		if strings.Contains(got, want) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: stdout %q, want %q in it", path, got, want)
		}
		time.Sleep(5 * time.Millisecond) // polling a file: nothing to block on
	}
}

func logStream(t *testing.T, path, stream string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	recs, err := crilog.ReadAll(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return string(crilog.Join(recs, stream))
}

func testinit(steps ...string) specs.ProcessSpec {
	return specs.ProcessSpec{Args: append([]string{"/testinit"}, steps...), Cwd: "/", Env: []string{"PATH=/"}}
}

// TestRealCRILog: an init and an exec, each with its own log path; kubelet's
// rotation (rename, ReopenLog) before and after a daemon restart; the
// errors of ReopenLog; a bad log path refused at the request.
func TestRealCRILog(t *testing.T) {
	env := newRealEnv(t)
	s := env.start(env.config())
	ctx := context.Background()
	dir := t.TempDir()
	initLog, execLog := filepath.Join(dir, "init.log"), filepath.Join(dir, "exec.log")
	stdin, in := fixture.Fifo(t, t.TempDir(), "stdin")
	id := env.id("a")
	info := createReal(t, s, CreateRequest{ID: id, Bundle: fixture.NewBundle(t, fixture.Args("echo", "hello", "--", "cat")).Path,
		Stdio: runtime.Stdio{Stdin: stdin, LogPath: initLog}})
	if got := info.Processes[0].Stdio; got != (runtime.Stdio{Stdin: stdin, LogPath: initLog}) {
		t.Fatalf("init's stdio %+v", got)
	}
	awaitStdout(t, initLog, "hello\n")
	if _, err := s.Exec(ctx, ExecRequest{ID: id, Pid: "e", Spec: testinit("echo", "from exec", "--", "sleep", "forever"),
		Stdio: runtime.Stdio{LogPath: execLog}}); err != nil {
		t.Fatal(err)
	}
	awaitStdout(t, execLog, "from exec\n")

	rotateAndReopen(t, s, id, "init", initLog, ".1")
	in.WriteString("after\n")
	if got := awaitStdout(t, initLog, "after\n"); got != "after\n" {
		t.Fatalf("new log: %q", got)
	}
	if got := logStream(t, initLog+".1", crilog.Stdout); got != "hello\n" {
		t.Fatalf("rotated log: %q", got)
	}

	// Errors: unknown container or process, no log path, bad log path.
	if err := s.ReopenLog(ctx, env.id("nope"), "init"); !errors.Is(err, ErrContainerNotFound) {
		t.Errorf("ReopenLog of an unknown container: %v", err)
	}
	if err := s.ReopenLog(ctx, id, "nope"); !errors.Is(err, ErrProcessNotFound) {
		t.Errorf("ReopenLog of an unknown process: %v", err)
	}
	execSleep(t, s, id, "plain")
	if err := s.ReopenLog(ctx, id, "plain"); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("ReopenLog of a process without a log path: %v, want FailedPrecondition", err)
	}
	missing := filepath.Join(dir, "gone", "0.log")
	if _, err := s.CreateContainer(ctx, CreateRequest{ID: env.id("bad"), Bundle: fixture.NewBundle(t).Path,
		Stdio: runtime.Stdio{LogPath: missing}}); !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), missing) {
		t.Errorf("create with a log path in a missing dir: %v, want InvalidArgument naming it", err)
	}
	if _, err := os.Lstat(filepath.Join(env.stateDir, env.id("bad"))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused create left its state dir: %v", err)
	}
	if _, err := s.Exec(ctx, ExecRequest{ID: id, Pid: "bad", Spec: testinit("echo"), Stdio: runtime.Stdio{LogPath: dir}}); !errdefs.IsInvalidArgument(err) {
		t.Errorf("exec with a directory as log path: %v, want InvalidArgument", err)
	}

	sub := liveSub(t, s)
	if err := s.Signal(ctx, id, "init", syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The execs "e" and "plain" are killed at the init's exit.
	if got := nextEvents(t, env, sub, 3); got[2] != "exit a init 137" {
		t.Fatalf("events %v, want the execs' exits then init's", got)
	}
	if err := s.ReopenLog(ctx, id, "init"); !errors.Is(err, ErrContainerNotFound) {
		t.Errorf("ReopenLog after the exit: %v, want ErrContainerNotFound", err)
	}
	waitIdle(t, s)
}

// TestRealCRILogRestart: a daemon that started an init and an exec with log
// paths is SIGKILLed; the next one adopts them and reopens their logs.
func TestRealCRILogRestart(t *testing.T) {
	env := newRealEnv(t)
	dir := t.TempDir()
	initLog, execLog := filepath.Join(dir, "init.log"), filepath.Join(dir, "exec.log")
	stdin, in := fixture.Fifo(t, t.TempDir(), "stdin")
	id := env.id("r")
	sc := daemonScript{StateDir: env.stateDir, Runc: fixture.Runc(t), RuncRoot: env.runcRoot, Shim: fixture.Shim(t),
		Containers: map[string]string{id: fixture.NewBundle(t, fixture.Args("echo", "hello", "--", "cat")).Path},
		Execs:      map[string]string{"e": id},
		Stdio:      map[string]runtime.Stdio{id + "/init": {Stdin: stdin, LogPath: initLog}, id + "/e": {LogPath: execLog}}}
	runDaemonRoleOnce(t, sc)
	awaitStdout(t, initLog, "hello\n")
	in.WriteString("while no daemon runs\n")
	awaitStdout(t, initLog, "while no daemon runs\n")

	s := env.start(env.config())
	rotateAndReopen(t, s, id, "init", initLog, ".1")
	in.WriteString("restarted\n")
	if got := awaitStdout(t, initLog, "restarted\n"); got != "restarted\n" {
		t.Fatalf("log after the reopen: %q", got)
	}
	if got := logStream(t, initLog+".1", crilog.Stdout); got != "hello\nwhile no daemon runs\n" {
		t.Fatalf("rotated log: %q", got)
	}
	rotateAndReopen(t, s, id, "e", execLog, ".1")
	if _, err := os.Stat(execLog); err != nil {
		t.Fatalf("the exec's reopen made no new file: %v", err)
	}
	sub := liveSub(t, s)
	if err := s.Signal(context.Background(), id, "init", syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if got := nextEvents(t, env, sub, 2); !equal(got, []string{"exit r e 137", "exit r init 137"}) {
		t.Fatalf("events %v, want the exec's exit then init's", got)
	}
	waitIdle(t, s)
}

func rotateAndReopen(t *testing.T, s *Supervisor, id, pid, path, suffix string) {
	t.Helper()
	if err := os.Rename(path, path+suffix); err != nil {
		t.Fatal(err)
	}
	if err := s.ReopenLog(context.Background(), id, pid); err != nil {
		t.Fatalf("ReopenLog %s %s: %v", id, pid, err)
	}
}

// TestRealCRILogFullDisk: a container whose log file system is full exits
// with its real status, published as ever.
func TestRealCRILogFullDisk(t *testing.T) {
	env := newRealEnv(t)
	s := env.start(env.config())
	dir := fixture.SmallTmpfs(t, "16k")
	big := strings.Repeat("z", 100<<10)
	sub := liveSub(t, s)
	createReal(t, s, CreateRequest{ID: env.id("full"), Stdio: runtime.Stdio{LogPath: filepath.Join(dir, "0.log")},
		Bundle: fixture.NewBundle(t, fixture.Args("echo", big, "--", "stderr", big, "--", "exit", "7")).Path})
	if got := nextEvents(t, env, sub, 2); !equal(got, []string{"start-container full", "exit full init 7"}) {
		t.Fatalf("events %v, want the exit with status 7", got)
	}
	waitIdle(t, s)
}
