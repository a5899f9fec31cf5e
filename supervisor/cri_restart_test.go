package supervisor

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/evjournal/containerd/supervisor/journal"
	"github.com/evjournal/containerd/supervisor/objects"
)

// What a restart gives back of the CRI objects: the loop's view before the
// stop, rebuilt from the snapshot and the journal after it (or the whole
// journal), whatever became of the snapshot file.

// buildObjects makes pods and containers in every state through the loop
// and returns the loop's view of them.
func buildObjects(h *harness) []objects.Object {
	h.t.Helper()
	ctx := context.Background()
	h.object(objects.Sandbox, "p1", "")
	h.startObject("p1")
	h.object(objects.Container, "c-run", "p1")
	h.startObject("c-run")

	h.object(objects.Container, "c-exit", "p1")
	h.startObject("c-exit")
	exited := h.live("c-exit")
	h.kill(exited.proc("init"), 1)
	h.expect("exit c-exit init 1")

	h.object(objects.Container, "c-oom", "p1")
	h.startObject("c-oom")
	oomed := h.live("c-oom")
	h.mon.ooms <- "c-oom"
	h.expect("oom c-oom")
	h.kill(oomed.proc("init"), 137)
	h.expect("exit c-oom init 137")

	h.object(objects.Container, "c-failed", "p1")
	h.rt.mu.Lock()
	h.rt.failStart = errors.New("runc create failed")
	h.rt.mu.Unlock()
	if _, err := h.s.StartObject(ctx, CreateRequest{ID: "c-failed", Bundle: "/b"}); err == nil {
		h.t.Fatal("the start of c-failed did not fail")
	}
	h.expect("cri-start-failed c-failed")
	h.rt.mu.Lock()
	h.rt.failStart = nil
	h.rt.mu.Unlock()

	h.object(objects.Container, "c-created", "p1")
	h.object(objects.Container, "c-gone", "p1")
	if _, err := h.s.BeginRemoveObject(ctx, "c-gone"); err != nil {
		h.t.Fatal(err)
	}
	must(h.t, h.s.RemoveObject(ctx, "c-gone"))
	h.expect("cri-deleted c-gone")
	h.object(objects.Sandbox, "p2", "")
	h.reserve(objects.Container, "c-reserved", "p1", "reserved")

	// The exited ones' containers are gone, as after their deletes.
	h.rt.waitFor(h.t, "the exited containers deleted", func() bool { return exited.isDeleted() && oomed.isDeleted() })
	l, err := h.s.Objects(ctx)
	must(h.t, err)
	if len(l) != 7 {
		h.t.Fatalf("built %d objects, want 7: %+v", len(l), l)
	}
	return l
}

// loadLog captures the "cri objects loaded" log entry of a start.
func loadLog() (*entryWaiter, *logrus.Entry) {
	hook := &entryWaiter{text: "cri objects loaded", ch: make(chan *logrus.Entry, 1)}
	logger := logrus.New()
	logger.SetOutput(discard{})
	logger.AddHook(hook)
	return hook, logrus.NewEntry(logger)
}

func wantSameObjects(t *testing.T, got, want []objects.Object) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d objects after the restart, %d before:\n%+v\nbefore:\n%+v", len(got), len(want), got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("object %d after the restart:\n%+v\nbefore:\n%+v", i, got[i], want[i])
		}
	}
}

// TestObjectsSurviveRestart: a new daemon on the same state and journal
// shows the objects exactly as the old one did (states, exit codes and
// reasons, times, pids of what runs), forgets reservations (their names
// are free), and goes on following the processes. With the snapshot it
// replays only the events after it; without one beside the CRI records, or
// with one it cannot read (set aside, not deleted), it replays the whole
// journal. (Without a snapshot and without records beside it, a daemon that
// never ran pods, nothing is replayed: TestFirstStartReplaysNothing.)
func TestObjectsSurviveRestart(t *testing.T) {
	for _, tc := range []struct {
		name     string
		edit     func(t *testing.T, path string)
		snapshot bool // read at the start
	}{
		{"snapshot", func(*testing.T, string) {}, true},
		{"no snapshot", func(t *testing.T, path string) { must(t, os.Remove(path)) }, false},
		{"corrupt snapshot", func(t *testing.T, path string) { must(t, os.WriteFile(path, []byte(`{"version":1,"obj`), 0o600)) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, dir := newFakeRuntime(), t.TempDir()
			criDir := filepath.Join(dir, "cri")
			must(t, os.MkdirAll(filepath.Join(criDir, "sandboxes"), 0o700)) // the CRI service's records
			h := newHarnessWith(t, rt, dir, func(c *Config) { c.ObjectsDir = criDir })
			want := buildObjects(h)
			last, _ := h.s.journal.Last()
			must(t, h.s.Stop())
			path := filepath.Join(criDir, objects.SnapshotFile)
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("no snapshot after the stop: %v", err)
			}
			tc.edit(t, path)

			hook, log := loadLog()
			h2 := newHarnessWith(t, rt, dir, func(c *Config) { c.Logger, c.ObjectsDir = log, criDir })
			got, err := h2.s.Objects(context.Background())
			must(t, err)
			wantSameObjects(t, got, want)

			loaded := waitRecv(t, hook.ch, "the load's log")
			from, replayed := loaded.Data["snapshot_seq"].(uint64), loaded.Data["replayed"].(int)
			if tc.snapshot && (from == 0 || uint64(replayed) != last-from) {
				t.Fatalf("loaded from the snapshot at %d and replayed %d events, want the %d after it", from, replayed, last-from)
			}
			if !tc.snapshot && (from != 0 || uint64(replayed) != last) {
				t.Fatalf("loaded from %d and replayed %d events, want the whole journal (%d)", from, replayed, last)
			}
			if tc.name == "corrupt snapshot" {
				aside, _ := filepath.Glob(path + ".bad-*")
				if len(aside) != 1 {
					t.Fatalf("the unreadable snapshot was not set aside: %v", aside)
				}
			}

			h2.reserve(objects.Container, "again", "p1", "reserved")
			h2.kill(h2.init("c-run"), 0)
			h2.await("exit c-run init 0")
			if o := h2.get("c-run"); o.State != objects.Exited || o.Reason != "Completed" {
				t.Fatalf("c-run after its exit under the new daemon: %+v", o)
			}
		})
	}
}

// await reads events until one is want (a new daemon's subscription
// replays the old one's events first).
func (h *harness) await(want string) {
	h.t.Helper()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ev, err := h.sub.Next(ctx)
		cancel()
		if err != nil {
			h.t.Fatalf("waiting for %q: %v", want, err)
		}
		if describe(ev) == want {
			return
		}
	}
}

// emitUnrelated journals n events that are no object's (a 0.2 client's
// pauses), in batches of per, as busy nodes do.
func emitUnrelated(t *testing.T, s *Supervisor, n, per int) {
	t.Helper()
	for ; n > 0; n -= per {
		_, err := call(context.Background(), s, "test-emit", func(done func(struct{}, error)) {
			for i := 0; i < min(n, per); i++ {
				s.emit(journal.Event{Type: journal.TypePause, ID: "other"})
			}
			s.replyAfterCommit(func() { done(struct{}{}, nil) }, func(err error) { done(struct{}{}, err) })
		})
		must(t, err)
	}
}

// replaySeqs returns the seqs r replays.
func replaySeqs(t *testing.T, r *journal.Replay) []uint64 {
	t.Helper()
	defer r.Close()
	var seqs []uint64
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return seqs
		}
		must(t, err)
		seqs = append(seqs, ev.Seq)
	}
}

// TestRetentionKeepsEventsAfterSnapshot: with a retain count far below
// the events that happen, the journal still holds every event after the
// last snapshot that was written (here: none could be written since), so
// that a daemon that starts from that snapshot gets the objects back;
// clients' replays stay bounded by the retain count.
func TestRetentionKeepsEventsAfterSnapshot(t *testing.T) {
	rt, dir := newFakeRuntime(), t.TempDir()
	_, quiet := loadLog()
	// Tens of thousands of events: fsyncing each (SyncAlways) would only
	// make this slow.
	small := func(c *Config) { c.RetainCount, c.Logger, c.SyncPolicy = 10, quiet, journal.SyncBatch }
	h := newHarnessWith(t, rt, dir, small)
	h.object(objects.Sandbox, "p", "")
	h.startObject("p")
	h.object(objects.Container, "c", "p")
	must(t, h.s.Stop())
	path := filepath.Join(dir, objects.SnapshotFile)
	written, err := os.ReadFile(path)
	must(t, err)
	l, err := objects.LoadSnapshot(written)
	must(t, err)
	from := l.Seq

	// From its start on, the second daemon cannot write a snapshot: a
	// directory stands where it goes (what it wrote before, of the same
	// objects, goes).
	h2 := newHarnessWith(t, rt, dir, small)
	for {
		must(t, os.RemoveAll(path))
		err := os.MkdirAll(filepath.Join(path, "x"), 0o700)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.ENOTDIR) { // ENOTDIR: a write landed meanwhile
			t.Fatal(err)
		}
	}
	h2.reserve(objects.Sandbox, "q", "", "name-q")
	_, err = h2.s.CommitObject(context.Background(), "q")
	must(t, err)
	_, err = h2.s.BeginRemoveObject(context.Background(), "c")
	must(t, err)
	must(t, h2.s.RemoveObject(context.Background(), "c"))
	h2.await("cri-deleted c")
	want, err := h2.s.Objects(context.Background())
	must(t, err)
	emitUnrelated(t, h2.s, journal.DefaultSegmentRecords+4000, 2000) // seals a segment retention would drop

	last, _ := h2.s.journal.Last()
	if seqs := replaySeqs(t, h2.s.journal.After(from, "")); len(seqs) == 0 || seqs[0] <= from+1 {
		t.Fatalf("a client's replay after %d starts at %v: the retain count is not in force, the test proves nothing", from, seqs[:min(1, len(seqs))])
	}
	seqs := replaySeqs(t, h2.s.journal.AfterRetained(from))
	if uint64(len(seqs)) != last-from || seqs[0] != from+1 || seqs[len(seqs)-1] != last {
		t.Fatalf("after the snapshot at %d the journal holds %d events (%d..%d), want all %d up to %d",
			from, len(seqs), seqs[0], seqs[len(seqs)-1], last-from, last)
	}
	must(t, h2.s.Stop())

	// A daemon that starts from the last snapshot written gets them back.
	must(t, os.RemoveAll(path))
	must(t, os.WriteFile(path, written, 0o600))
	hook, log := loadLog()
	h3 := newHarnessWith(t, rt, dir, func(c *Config) { small(c); c.Logger = log })
	got, err := h3.s.Objects(context.Background())
	must(t, err)
	loaded := waitRecv(t, hook.ch, "the load's log")
	wantSameObjects(t, got, want)
	if loaded.Data["snapshot_seq"].(uint64) != from || uint64(loaded.Data["replayed"].(int)) != last-from {
		t.Fatalf("loaded %v, want the snapshot at %d and the %d events after it", loaded.Data, from, last-from)
	}
}

// TestRetentionNotHeldByIdleObjects: objects that do not change (a node
// whose pods just run, or a daemon used through the 0.2 API only) do not
// hold retention back for ever: the oldest segment goes once the journal
// moved on, however old the last change of the objects is.
func TestRetentionNotHeldByIdleObjects(t *testing.T) {
	_, quiet := loadLog()
	h := newHarnessWith(t, newFakeRuntime(), t.TempDir(), func(c *Config) {
		c.RetainCount, c.Logger, c.SyncPolicy = 10, quiet, journal.SyncBatch // no fsync per event: tens of thousands
	})
	h.object(objects.Sandbox, "p", "")
	h.startObject("p")
	emitUnrelated(t, h.s, journal.DefaultSegmentRecords+4000, 2000) // seals a segment
	// Snapshots are written off the loop, and retention runs at the
	// commits after them: more commits until it did, bounded.
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := h.s.journal.AfterRetained(0)
		first, err := r.Next()
		r.Close()
		must(t, err)
		if first.Seq > 1 {
			break
		}
		if time.Now().After(deadline) {
			last, _ := h.s.journal.Last()
			t.Fatalf("the journal keeps all its %d events with a retain count of 10", last)
		}
		emitUnrelated(t, h.s, 100, 100)
	}
	if o := h.get("p"); o.State != objects.Running {
		t.Fatalf("p after the retention: %+v", o)
	}
}

// TestFirstStartReplaysNothing: the first start of a daemon that keeps no
// CRI records (a 0.2 node on a long journal) replays nothing for the
// objects, writes an empty snapshot at once, and the next start reads it.
func TestFirstStartReplaysNothing(t *testing.T) {
	rt, dir := newFakeRuntime(), t.TempDir()
	h := newHarness(t, rt, dir)
	for _, id := range []string{"a", "b", "c"} {
		h.create(id)
	}
	must(t, h.s.Stop())
	path := filepath.Join(dir, objects.SnapshotFile)
	must(t, os.Remove(path))

	hook, log := loadLog()
	h2 := newHarnessWith(t, rt, dir, func(c *Config) { c.Logger = log })
	loaded := waitRecv(t, hook.ch, "the load's log")
	last, _ := h2.s.journal.Last()
	if from, replayed := loaded.Data["snapshot_seq"].(uint64), loaded.Data["replayed"].(int); replayed != 0 || from == 0 || from > last {
		t.Fatalf("first start without a snapshot: from %d, replayed %d; want nothing replayed, from the journal's end", from, replayed)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no snapshot written at the first start: %v", err)
	}
}
