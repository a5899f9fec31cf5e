package supervisor

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/supervisor/journal"
	"github.com/evjournal/containerd/supervisor/objects"
)

// TestObjectsWhileJournalFull: with the journal's disk full, kubelet can
// still remove pods and containers (a removal frees disk): RemoveObject
// answers at once and its cri-deleted is journaled once, in order, when the
// journal writes again. Making objects is refused as Unavailable, and a
// refused commit leaves nothing behind: no object holds the name, none
// comes back at a restart.
func TestObjectsWhileJournalFull(t *testing.T) {
	ctx := context.Background()
	jdir := fixture.SmallTmpfs(t, "256k")
	rt, dir := newFakeRuntime(), t.TempDir()
	_, quiet := loadLog() // the snapshot writer's ENOSPC warnings
	h := newHarnessWith(t, rt, dir, func(c *Config) { c.JournalDir, c.Logger = jdir, quiet })
	h.object(objects.Sandbox, "p", "")
	h.object(objects.Container, "c", "p")
	filler := fixture.FillFS(t, jdir)

	// Commits succeed while the segment's last page has room; then one is
	// refused: the journal cannot write.
	refused := ""
	for i := 0; refused == "" && i < 500; i++ {
		id := fmt.Sprintf("q%03d%s", i, strings.Repeat("x", 60))
		h.reserve(objects.Sandbox, id, "", "name-"+id)
		if _, err := h.s.CommitObject(ctx, id); err != nil {
			checkJournalError(t, err, jdir)
			refused = id
			break
		}
		h.expect("cri-created " + id)
	}
	if refused == "" {
		t.Fatal("the journal never filled up")
	}
	if _, err := h.s.Object(ctx, refused); !errdefs.IsNotFound(err) {
		t.Fatalf("the object whose commit was refused: %v, want NotFound", err)
	}
	must(t, h.s.ReleaseObject(ctx, refused)) // the CRI service's undo
	h.reserve(objects.Sandbox, "again", "", "name-"+refused)
	must(t, h.s.ReleaseObject(ctx, "again"))

	// Removal works at once, without the journal.
	if _, err := h.s.BeginRemoveObject(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	must(t, h.s.RemoveObject(ctx, "c"))
	if _, err := h.s.Object(ctx, "c"); !errdefs.IsNotFound(err) {
		t.Fatalf("c after its removal: %v, want NotFound", err)
	}
	// Making objects is refused, and leaves nothing behind.
	h.reserve(objects.Container, "c2", "p", "name-c")
	_, err := h.s.CommitObject(ctx, "c2")
	checkJournalError(t, err, jdir)
	if _, err := h.s.Object(ctx, "c2"); !errdefs.IsNotFound(err) {
		t.Fatalf("a commit refused while degraded made c2 visible: %v", err)
	}
	must(t, h.s.ReleaseObject(ctx, "c2"))

	// Space comes back: the held events are journaled, in order, once.
	must(t, os.Remove(filler))
	h.clock.Advance(maxHeldRetry)
	h.expect("cri-created "+refused, "cri-deleted "+refused, "cri-deleted c")
	var deletes []string
	for _, ev := range storedEvents(t, h.s) {
		if ev.Type == journal.TypeCRIDeleted {
			deletes = append(deletes, ev.ID)
		}
	}
	if len(deletes) != 2 || deletes[0] != refused || deletes[1] != "c" {
		t.Fatalf("journaled removals %v, want %s's then c's, once each", deletes, refused)
	}
	if _, err := h.s.CommitObject(ctx, "c2"); !errdefs.IsFailedPrecondition(err) {
		t.Fatalf("commit of a released reservation: %v", err)
	}

	// A restart shows what the daemon showed.
	want, err := h.s.Objects(ctx)
	must(t, err)
	must(t, h.s.Stop())
	h2 := newHarnessWith(t, rt, dir, func(c *Config) { c.JournalDir, c.Logger = jdir, quiet })
	got, err := h2.s.Objects(ctx)
	must(t, err)
	wantSameObjects(t, got, want)
}
