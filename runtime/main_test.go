package runtime_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/specs"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	if os.Getenv(launcherEnv) != "" {
		os.Exit(launcherMain())
	}
	fixture.Main(m)
}

// waitLimit bounds every wait of these tests for a container event.
const waitLimit = 20 * time.Second

// env is one test's daemon side: a state root and the binaries.
type env struct {
	root, runc, runcRoot, shim string
}

// newEnv is for root tests: it needs runc and the shim.
func newEnv(t *testing.T) *env {
	t.Helper()
	fixture.RequireRoot(t)
	return &env{root: t.TempDir(), runc: fixture.Runc(t), runcRoot: fixture.RuncRoot(t), shim: fixture.Shim(t)}
}

func (e *env) opts(id, bundle string) runtime.ContainerOpts {
	return runtime.ContainerOpts{
		Root: e.root, ID: id, Bundle: bundle, Runtime: e.runc, Shim: e.shim,
		RuntimeArgs: []string{"--root", e.runcRoot}, StartTimeout: waitLimit,
	}
}

// newContainer makes a container whose Delete is a cleanup of the test.
func (e *env) newContainer(t *testing.T, b *fixture.Bundle) *runtime.Container {
	t.Helper()
	c, err := runtime.New(e.opts(fixture.UniqueID(t), b.Path))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { deleteContainer(t, c) })
	return c
}

func deleteContainer(t *testing.T, c *runtime.Container) {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := c.Delete(ctx); err != nil {
		t.Errorf("Delete %s: %v", c.ID(), err)
	}
}

// run creates and starts the init of a new container of bundle b.
func (e *env) run(t *testing.T, b *fixture.Bundle, stdio runtime.Stdio) (*runtime.Container, *runtime.Process) {
	t.Helper()
	c := e.newContainer(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	p, err := c.Create(ctx, runtime.CreateOpts{Stdio: stdio})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return c, p
}

// waitExit waits for the process's exit FIFO to hang up (what the monitor's
// epoll sees) and returns its exit status.
func waitExit(t *testing.T, p *runtime.Process) (uint32, string) {
	t.Helper()
	if !runtime.WaitHangup(p.ExitFD(), waitLimit) {
		t.Fatalf("process %s (pid %d): no exit within %v", p.ID(), p.SystemPid(), waitLimit)
	}
	return p.ExitStatus()
}

func wantStatus(t *testing.T, p *runtime.Process, want uint32) {
	t.Helper()
	got, reason := waitExit(t, p)
	if got != want || reason != "" {
		t.Fatalf("process %s: exit status %d (reason %q), want %d from the shim", p.ID(), got, reason, want)
	}
}

func status(t *testing.T, c *runtime.Container) string {
	t.Helper()
	s, err := c.Status(context.Background())
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	return s
}

// sleeper is an init that runs until killed. (testinit's own "sleep
// forever" is `select {}`, which the Go runtime ends at once with "all
// goroutines are asleep - deadlock!", status 2.)
var sleeper = fixture.Args("sleep", "1h")

// execSpec is an exec of the test init running steps.
func execSpec(steps ...string) specs.ProcessSpec {
	s := fixture.DefaultSpec().Process
	s.Args = append([]string{"/testinit"}, steps...)
	return *s
}

// noPidNS drops the pid namespace (see fixture.NoPidNamespace).
var noPidNS = fixture.NoPidNamespace()

func fifo(t *testing.T, dir, name string) (string, *os.File) { return fixture.Fifo(t, dir, name) }

func readUntil(t *testing.T, f *os.File, want string) string {
	return fixture.ReadUntil(t, f, want, waitLimit)
}

// dirEntries lists dir, for the "nothing left on disk" checks.
func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// pollIn waits up to timeout for fd to be readable (a pidfd: its process
// exited), retrying on EINTR.
func pollIn(fd int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds())+1)
		if err == nil {
			return n == 1
		}
		if err != unix.EINTR {
			return false
		}
	}
	return false
}
