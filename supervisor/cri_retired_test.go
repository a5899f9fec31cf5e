package supervisor

import (
	"context"
	"io"
	"testing"

	"github.com/evjournal/containerd/supervisor/journal"
	"github.com/evjournal/containerd/supervisor/objects"
)

// TestRetiredObjectKeepsItsExitStatus: the daemon died after an object's
// init exit was handled up to the retire of its container (its state dir
// moved to .retired; a StopContainer waiting for the exit had its answer:
// exits are visible before they are journaled) and before the exit was
// journaled. At the restart the retired container's exit is replayed with
// the status its shim recorded: the object is exited 137, and the journal
// holds that one exit, not a 255 for an exit found nowhere beside it.
func TestRetiredObjectKeepsItsExitStatus(t *testing.T) {
	rt, dir := newFakeRuntime(), t.TempDir()
	h := newHarness(t, rt, dir)
	ctx := context.Background()
	must(t, h.s.ReserveObject(ctx, ObjectSpec{Kind: objects.Sandbox, ID: "p1", Name: "pod p1"}))
	if _, err := h.s.CommitObject(ctx, "p1"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.s.StartObject(ctx, CreateRequest{ID: "p1", Bundle: "/b"}); err != nil {
		t.Fatal(err)
	}
	h.expect("cri-created p1", "start-container p1")
	h.s.Stop()

	// As the crash left it: the init dead with its status recorded, the
	// container retired, the exit in no journal.
	rt.mu.Lock()
	c := rt.live["p1"]
	rt.mu.Unlock()
	c.proc("init").die(137)
	must(t, c.Retire())

	h2 := newHarness(t, rt, dir)
	h2.expect("cri-created p1", "start-container p1", "exit p1 init 137")
	rt.waitFor(t, "the retired container deleted", c.isDeleted)
	o, err := h2.s.Object(ctx, "p1")
	if err != nil || o.State != objects.Exited || o.ExitCode != 137 {
		t.Fatalf("object after the restart: %+v %v, want exited 137", o, err)
	}
	exits := 0
	r := h2.s.journal.After(0, "p1")
	defer r.Close()
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		must(t, err)
		if ev.Type == journal.TypeExit {
			exits++
		}
	}
	if exits != 1 {
		t.Fatalf("%d exits of p1 journaled, want 1", exits)
	}
}
