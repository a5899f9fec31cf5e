package runtime_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/cri/crilog"
	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/runtime"
	"golang.org/x/sys/unix"
)

// readLog parses the CRI log at path; a missing file is no records.
func readLog(t *testing.T, path string) []crilog.Record {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	recs, err := crilog.ReadAll(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v\n%s", path, err, data)
	}
	return recs
}

// awaitLog reads the log at path until each stream holds at least its
// wanted bytes (crilog.Join), and returns the records.
func awaitLog(t *testing.T, path string, want map[string]string) []crilog.Record {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		recs := readLog(t, path)
		done := true
		for stream, w := range want {
			if !strings.Contains(string(crilog.Join(recs, stream)), w) {
				done = false
			}
		}
		if done {
			return recs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after %v: stdout %q, stderr %q; want streams holding %q", path, waitLimit, crilog.Join(recs, crilog.Stdout), crilog.Join(recs, crilog.Stderr), want)
		}
		time.Sleep(5 * time.Millisecond) // polling a file: nothing to block on
	}
}

// records renders a stream's records as "P:content" / "F:content".
func records(recs []crilog.Record, stream string) []string {
	var out []string
	for _, r := range recs {
		if r.Stream != stream {
			continue
		}
		tag := "F:"
		if r.Partial {
			tag = "P:"
		}
		out = append(out, tag+strings.TrimSuffix(string(r.Content), "\r"))
	}
	return out
}

func wantRecords(t *testing.T, recs []crilog.Record, stream string, want ...string) {
	t.Helper()
	got := records(recs, stream)
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("%s records %.200q, want %.200q", stream, got, want)
	}
}

// TestLogPathStreams: stdout and stderr reach the CRI log as their own
// streams, in order, and a line longer than the bound is split into P
// records ending with an F; the new file is 0640.
func TestLogPathStreams(t *testing.T) {
	e := newEnv(t)
	logPath := filepath.Join(t.TempDir(), "0.log")
	long := strings.Repeat("a", 2*crilog.DefaultMaxLine+1000)
	b := fixture.NewBundle(t, fixture.Args("echo", "out1", "--", "stderr", "err1", "--", "echo", long, "--",
		"stderr", "err2", "--", "echo", "out2", "--", "exit", "3"))
	_, p := e.run(t, b, runtime.Stdio{LogPath: logPath})
	wantStatus(t, p, 3)
	recs := awaitLog(t, logPath, map[string]string{crilog.Stdout: "out2\n", crilog.Stderr: "err2\n"})
	// The long line: P records of at most the bound (also split where a
	// pipe read ended mid-line: the shim writes what it read at once), then
	// an F; joined they are the line.
	got := records(recs, crilog.Stdout)
	if len(got) < 5 || got[0] != "F:out1" || got[len(got)-1] != "F:out2" {
		t.Fatalf("stdout records %.200q", got)
	}
	var joined strings.Builder
	for i, r := range got[1 : len(got)-1] {
		last := i == len(got)-3
		if tag := r[:2]; (tag == "F:") != last || len(r)-2 > crilog.DefaultMaxLine {
			t.Fatalf("record %d of the long line: %.40q (%d bytes)", i, r, len(r)-2)
		}
		joined.WriteString(r[2:])
	}
	if joined.String() != long {
		t.Fatalf("the long line's records join to %d bytes, want %d", joined.Len(), len(long))
	}
	wantRecords(t, recs, crilog.Stderr, "F:err1", "F:err2")
	if st, err := os.Stat(logPath); err != nil || st.Mode().Perm() != 0o640 {
		t.Fatalf("log file: %v, mode %v; want 0640", err, st.Mode())
	}
	if got := p.Stdio(); got != (runtime.Stdio{LogPath: logPath}) {
		t.Fatalf("Stdio() = %+v", got)
	}
}

// TestLogPathTerminal: with a terminal everything is the stdout stream.
func TestLogPathTerminal(t *testing.T) {
	e := newEnv(t)
	logPath := filepath.Join(t.TempDir(), "0.log")
	b := fixture.NewBundle(t, fixture.Terminal(), fixture.Args("echo", "out", "--", "stderr", "err", "--", "exit", "0"))
	_, p := e.run(t, b, runtime.Stdio{LogPath: logPath})
	wantStatus(t, p, 0)
	recs := awaitLog(t, logPath, map[string]string{crilog.Stdout: "err"})
	wantRecords(t, recs, crilog.Stdout, "F:out", "F:err")
	wantRecords(t, recs, crilog.Stderr)
}

// TestLogPathExec: an exec writes into its own log, apart from init's.
func TestLogPathExec(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	initLog, execLog := filepath.Join(dir, "init.log"), filepath.Join(dir, "exec.log")
	c, _ := e.run(t, fixture.NewBundle(t, fixture.Args("echo", "from init", "--", "sleep", "1h")), runtime.Stdio{LogPath: initLog})
	p, err := c.Exec(context.Background(), "x", execSpec("echo", "from exec", "--", "stderr", "exec err"), runtime.Stdio{LogPath: execLog})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, p, 0)
	recs := awaitLog(t, execLog, map[string]string{crilog.Stdout: "from exec\n", crilog.Stderr: "exec err\n"})
	wantRecords(t, recs, crilog.Stdout, "F:from exec")
	wantRecords(t, awaitLog(t, initLog, map[string]string{crilog.Stdout: "from init\n"}), crilog.Stdout, "F:from init")
}

// TestLogPathReopen: after kubelet's rotation (rename, then ReopenLog) new
// output goes to a new file at the log path and the renamed one holds the
// old output only; a reopen the shim cannot do is an error and the old
// file stays in use; the same after a reload of the container (a daemon
// restart).
func TestLogPathReopen(t *testing.T) {
	e := newEnv(t)
	dir := filepath.Join(t.TempDir(), "pod")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "0.log")
	inPath, in := fifo(t, t.TempDir(), "stdin")
	c, p := e.run(t, fixture.NewBundle(t, fixture.Args("cat")), runtime.Stdio{Stdin: inPath, LogPath: logPath})
	ctx := context.Background()
	say := func(line string) { in.WriteString(line + "\n") }

	say("before")
	awaitLog(t, logPath, map[string]string{crilog.Stdout: "before\n"})
	rotate(t, logPath, logPath+".1")
	if err := p.ReopenLog(ctx); err != nil {
		t.Fatalf("ReopenLog: %v", err)
	}
	say("after")
	wantRecords(t, awaitLog(t, logPath, map[string]string{crilog.Stdout: "after\n"}), crilog.Stdout, "F:after")
	wantRecords(t, readLog(t, logPath+".1"), crilog.Stdout, "F:before")

	// The log dir is gone: the reopen fails, the output goes on into the
	// file the shim has open.
	moved := filepath.Join(filepath.Dir(dir), "moved")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	if err := p.ReopenLog(ctx); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), logPath) {
		t.Fatalf("ReopenLog in a missing dir: %v, want FailedPrecondition naming the log", err)
	}
	say("still")
	awaitLog(t, filepath.Join(moved, "0.log"), map[string]string{crilog.Stdout: "still\n"})
	if err := os.Rename(moved, dir); err != nil {
		t.Fatal(err)
	}

	// A restarted daemon loads the record and reopens through the shim.
	loaded, err := runtime.Load(e.root, c.ID())
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	defer func() {
		for _, p := range loaded.Processes() {
			p.Close()
		}
	}()
	lp, ok := loaded.Process("init")
	if !ok || lp.Stdio().LogPath != logPath {
		t.Fatalf("loaded init: %v, stdio %+v", ok, lp.Stdio())
	}
	rotate(t, logPath, logPath+".2")
	if err := lp.ReopenLog(ctx); err != nil {
		t.Fatalf("ReopenLog after a reload: %v", err)
	}
	say("reloaded")
	wantRecords(t, awaitLog(t, logPath, map[string]string{crilog.Stdout: "reloaded\n"}), crilog.Stdout, "F:reloaded")
	wantRecords(t, readLog(t, logPath+".2"), crilog.Stdout, "F:after", "F:still")

	in.Close()
	if err := p.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, p, 0)
	if err := p.ReopenLog(ctx); !errdefs.IsFailedPrecondition(err) {
		t.Fatalf("ReopenLog after the exit: %v, want FailedPrecondition", err)
	}
}

func rotate(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

// TestReopenLogWithoutLogPath: FailedPrecondition, and the process runs on.
func TestReopenLogWithoutLogPath(t *testing.T) {
	e := newEnv(t)
	_, p := e.run(t, fixture.NewBundle(t, sleeper), runtime.Stdio{})
	if err := p.ReopenLog(context.Background()); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "no log path") {
		t.Fatalf("ReopenLog: %v, want FailedPrecondition \"no log path\"", err)
	}
	if p.State() != runtime.Running {
		t.Fatal("the process stopped")
	}
}

// TestLogPathRefused: a log path that is relative, in a missing dir, a
// directory, a FIFO or a symlink, or that comes with stdout/stderr, is
// refused at the request (InvalidArgument naming it), for the init and for
// an exec: no process dir, no shim, no runc container, nothing written.
func TestLogPathRefused(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	fifoPath := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifoPath, 0o600); err != nil {
		t.Fatal(err)
	}
	host := filepath.Join(dir, "host-file")
	os.WriteFile(host, []byte("precious"), 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink(host, link)
	outPath, _ := fifo(t, dir, "out")
	cases := []struct {
		name  string
		stdio runtime.Stdio
		text  string
	}{
		{"relative", runtime.Stdio{LogPath: "pod/0.log"}, "not an absolute path"},
		{"missing dir", runtime.Stdio{LogPath: filepath.Join(dir, "nope", "0.log")}, "does not exist"},
		{"directory", runtime.Stdio{LogPath: dir}, "a directory"},
		{"fifo", runtime.Stdio{LogPath: fifoPath}, "FIFO"},
		{"symlink", runtime.Stdio{LogPath: link}, "a symlink"},
		{"with stdout", runtime.Stdio{LogPath: filepath.Join(dir, "a.log"), Stdout: outPath}, "stdout and stderr must be empty"},
		{"with stderr", runtime.Stdio{LogPath: filepath.Join(dir, "b.log"), Stderr: outPath}, "stdout and stderr must be empty"},
	}
	c := e.newContainer(t, fixture.NewBundle(t, sleeper))
	ctx := context.Background()
	for _, tc := range cases {
		_, err := c.Create(ctx, runtime.CreateOpts{Stdio: tc.stdio, Start: true})
		checkRefused(t, "Create "+tc.name, err, tc.text, tc.stdio.LogPath)
		if err := runtime.ValidateStdio(tc.stdio); !errdefs.IsInvalidArgument(err) {
			t.Errorf("ValidateStdio %s: %v, want InvalidArgument", tc.name, err)
		}
	}
	if left := dirEntries(t, c.Dir()); len(left) != 1 || left[0] != "state.json" {
		t.Fatalf("container dir after refused creates: %v, want only state.json", left)
	}
	if left := dirEntries(t, e.runcRoot); len(left) != 0 {
		t.Fatalf("runc state after refused creates: %v", left)
	}
	r, _ := e.run(t, fixture.NewBundle(t, sleeper), runtime.Stdio{})
	for _, tc := range cases {
		_, err := r.Exec(ctx, "x", execSpec("echo", "hi"), tc.stdio)
		checkRefused(t, "Exec "+tc.name, err, tc.text, tc.stdio.LogPath)
	}
	if left := dirEntries(t, r.Dir()); len(left) != 2 { // state.json, init
		t.Fatalf("container dir after refused execs: %v", left)
	}
	if data, _ := os.ReadFile(host); string(data) != "precious" {
		t.Fatalf("host file now %q", data)
	}
	for _, name := range []string{"a.log", "b.log"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s was created", name)
		}
	}
}

func checkRefused(t *testing.T, what string, err error, text, path string) {
	t.Helper()
	if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), text) || !strings.Contains(err.Error(), path) {
		t.Errorf("%s: %v, want InvalidArgument naming %s and saying %q", what, err, path, text)
	}
}

// TestLogPathFullDisk: on a full file system the output that cannot be
// written is dropped with a warning in shim-log.json, and the exit still
// comes with its real status.
func TestLogPathFullDisk(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=16k"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	logPath := filepath.Join(dir, "0.log")
	big := strings.Repeat("z", 100<<10) // each echo alone overflows the file system
	b := fixture.NewBundle(t, fixture.Args("echo", big, "--", "echo", big, "--", "stderr", big, "--", "exit", "7"))
	c, p := e.run(t, b, runtime.Stdio{LogPath: logPath})
	wantStatus(t, p, 7)
	shimLog := filepath.Join(c.Dir(), "init", "shim-log.json")
	deadline := time.Now().Add(waitLimit)
	for {
		data, _ := os.ReadFile(shimLog)
		if strings.Contains(string(data), "no space left on device") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("shim-log.json %q: no warning about the full log", data)
		}
		time.Sleep(5 * time.Millisecond) // polling a file: nothing to block on
	}
}
