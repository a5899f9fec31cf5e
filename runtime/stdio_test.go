package runtime_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/runtime"
)

// TestStdioFifos: output reaches the client's FIFOs, input reaches the
// process, and close-stdin (plus the client's close) ends `cat`.
func TestStdioFifos(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	inPath, in := fifo(t, dir, "stdin")
	outPath, out := fifo(t, dir, "stdout")
	errPath, errf := fifo(t, dir, "stderr")
	b := fixture.NewBundle(t, fixture.Args("echo", "hello", "--", "stderr", "oops", "--", "cat", "--", "exit", "7"))
	_, p := e.run(t, b, runtime.Stdio{Stdin: inPath, Stdout: outPath, Stderr: errPath})
	readUntil(t, out, "hello\n")
	readUntil(t, errf, "oops\n")
	if _, err := in.WriteString("through the fifo\n"); err != nil {
		t.Fatal(err)
	}
	readUntil(t, out, "through the fifo\n")
	if p.State() != runtime.Running {
		t.Fatal("cat ended before stdin was closed")
	}
	in.Close()
	if err := p.CloseStdin(); err != nil {
		t.Fatalf("CloseStdin: %v", err)
	}
	wantStatus(t, p, 7)
}

// TestTerminalResize: a tty process sees the size the daemon sets.
func TestTerminalResize(t *testing.T) {
	e := newEnv(t)
	outPath, out := fifo(t, t.TempDir(), "stdout")
	_, p := e.run(t, fixture.NewBundle(t, fixture.Terminal(), fixture.Args("winsize")), runtime.Stdio{Stdout: outPath})
	if !p.Terminal() {
		t.Fatal("Terminal() = false")
	}
	readUntil(t, out, "winsize ")
	if err := p.Resize(100, 40); err != nil {
		t.Fatalf("Resize: %v", err)
	}
	got := readUntil(t, out, "winsize 40x100")
	if !strings.Contains(got, "winsize 40x100") {
		t.Fatalf("output %q", got)
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, p, 137)
}

// TestExecStdio: an exec's output goes to its own FIFO.
func TestExecStdio(t *testing.T) {
	e := newEnv(t)
	c, _ := e.run(t, fixture.NewBundle(t, sleeper), runtime.Stdio{})
	outPath, out := fifo(t, t.TempDir(), "stdout")
	p, err := c.Exec(context.Background(), "x", execSpec("echo", "from", "exec"), runtime.Stdio{Stdout: outPath})
	if err != nil {
		t.Fatal(err)
	}
	readUntil(t, out, "from exec\n")
	wantStatus(t, p, 0)
}

// TestShimRefusesHostFileOutput: the shim itself (not only the daemon's
// request check) refuses an output naming an existing file, so a file
// swapped in after the check is not written; the create fails, the file is
// unchanged and the container can be deleted.
func TestShimRefusesHostFileOutput(t *testing.T) {
	e := newEnv(t)
	host := filepath.Join(t.TempDir(), "host-file")
	os.WriteFile(host, []byte("precious"), 0o644)
	c := e.newContainer(t, fixture.NewBundle(t, fixture.Args("echo", "overwritten")))
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if _, err := c.Create(ctx, runtime.CreateOpts{Stdio: runtime.Stdio{Stdout: host}}); err == nil || !strings.Contains(err.Error(), host) {
		t.Fatalf("Create with stdout %s: %v, want an error naming it", host, err)
	}
	if data, _ := os.ReadFile(host); string(data) != "precious" {
		t.Fatalf("host file now %q", data)
	}
}
