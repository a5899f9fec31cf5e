package runtime_test

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/runtime"
)

// TestRetireThenReuse: once retired, the id is free at once; the new
// incarnation starts although the old runc state is still there, and the old
// one's Delete leaves the new one's runc state alone.
func TestRetireThenReuse(t *testing.T) {
	e := newEnv(t)
	b := fixture.NewBundle(t, sleeper)
	old, p := e.run(t, b, runtime.Stdio{})
	id := old.ID()
	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, p, 137)
	if err := old.Retire(); err != nil {
		t.Fatalf("Retire: %v", err)
	}
	if got := status(t, old); got != "stopped" {
		t.Fatalf("retired container's runc status = %q, want stopped (kept until Delete)", got)
	}
	if got, _ := runtime.ListIDs(e.root); len(got) != 0 {
		t.Fatalf("ListIDs after Retire = %v", got)
	}

	c, err := runtime.New(e.opts(id, b.Path))
	if err != nil {
		t.Fatalf("New with the retired id: %v", err)
	}
	t.Cleanup(func() { deleteContainer(t, c) })
	ctx := context.Background()
	if _, err := c.Create(ctx, runtime.CreateOpts{}); err != nil {
		t.Fatalf("Create of the new incarnation: %v", err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	retired, err := runtime.RetiredContainers(e.root)
	if err != nil || len(retired) != 1 || retired[0].Incarnation() != old.Incarnation() {
		t.Fatalf("RetiredContainers = %v, %v", retired, err)
	}
	closeAll(retired[0])

	if err := old.Delete(ctx); err != nil {
		t.Fatalf("Delete of the retired incarnation: %v", err)
	}
	if got := status(t, c); got != "running" {
		t.Fatalf("new incarnation after the old one's Delete: %q, want running", got)
	}
	if left := dirEntries(t, filepath.Join(e.root, ".retired")); len(left) != 0 {
		t.Fatalf(".retired after Delete: %v", left)
	}
	if err := old.Delete(ctx); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
	if got := status(t, c); got != "running" {
		t.Fatalf("new incarnation after a second Delete of the old: %q", got)
	}
}

// TestExecExitAfterRetire: an exec that outlives init's exit records its
// status in the (renamed) retired dir. Without a pid namespace the exec
// survives init, so the order is certain. This needs the shim to write its
// files by names relative to its cwd (docs/shim-contract.md, "State on disk").
func TestExecExitAfterRetire(t *testing.T) {
	e := newEnv(t)
	c, initp := e.run(t, fixture.NewBundle(t, sleeper, noPidNS), runtime.Stdio{})
	ex, err := c.Exec(context.Background(), "late", execSpec("sleep", "1h"), runtime.Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	initp.Signal(syscall.SIGKILL)
	wantStatus(t, initp, 137)
	if err := c.Retire(); err != nil {
		t.Fatal(err)
	}
	if err := ex.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, ex, 143)
	if !ex.ExitPublished() {
		if err := ex.MarkExitPublished(); err != nil {
			t.Fatal(err)
		}
	}
	if !ex.ExitPublished() {
		t.Fatal("ExitPublished false after MarkExitPublished")
	}
}
