package supervisor

import (
	"context"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/supervisor/journal"
)

// TestSubscribeInTheSameBatchAsAnEvent registers a subscriber in the same
// loop batch as an event, after its append and before its commit, under
// every sync policy: the subscriber gets it once (live), not also from the
// replay, and the next event follows with no gap.
func TestSubscribeInTheSameBatchAsAnEvent(t *testing.T) {
	for _, policy := range []journal.SyncPolicy{journal.SyncBatch, journal.SyncAlways, journal.SyncNone} {
		for _, bySeq := range []bool{false, true} {
			t.Run(policy.String(), func(t *testing.T) {
				h := newHarnessWith(t, newFakeRuntime(), t.TempDir(), func(c *Config) { c.SyncPolicy = policy })
				a := h.create("a")
				started := h.expect("start-container a")[0]
				req := SubscribeRequest{After: started.Timestamp} // resume after the last event seen
				if bySeq {
					req = SubscribeRequest{AfterSeq: started.Seq}
				}
				subCh := make(chan *Subscription, 1)
				h.s.send(func(s *Supervisor) {
					s.onOOM("a") // appended now, committed at the end of this batch
					subCh <- s.subscribe(req)
				})
				sub := <-subCh
				defer sub.Close()
				h.kill(a.proc("init"), 0)
				var got []string
				for len(got) < 2 {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					ev, err := sub.Next(ctx)
					cancel()
					if err != nil {
						t.Fatalf("after %v: %v", got, err)
					}
					got = append(got, describe(ev))
				}
				if got[0] != "oom a" || got[1] != "exit a init 0" {
					t.Fatalf("subscriber got %q, want the oom once then the exit", got)
				}
			})
		}
	}
}

// TestCursorFromAnotherJournalRefused: a seq cursor is honoured only by the
// journal that numbered it. One from a replaced journal (its id differs), or
// beyond this journal's end (a client of a lost journal that sends no id),
// is refused with FailedPrecondition instead of skipping events.
func TestCursorFromAnotherJournalRefused(t *testing.T) {
	old := newHarness(t, newFakeRuntime(), t.TempDir())
	old.create("a")
	old.create("b")
	last := old.expect("start-container a", "start-container b")[1]
	oldID := old.s.JournalID()

	// The daemon's journal was lost: a new one, numbered from 1 again.
	h := newHarness(t, newFakeRuntime(), t.TempDir())
	h.create("c")
	h.expect("start-container c")
	if h.s.JournalID() == oldID {
		t.Fatal("two journals with one id")
	}
	for _, req := range []SubscribeRequest{
		{AfterSeq: 1, JournalID: oldID},          // within the new journal's range, but not its seq
		{AfterSeq: last.Seq},                     // no id, beyond the new journal's end
		{AfterSeq: last.Seq, JournalID: oldID},   // both
		{AfterSeq: 1, JournalID: oldID, ID: "c"}, // filtered the same
	} {
		_, err := h.s.Subscribe(context.Background(), req)
		if !errdefs.IsFailedPrecondition(err) {
			t.Errorf("%+v: error %v, want FailedPrecondition", req, err)
		}
	}
	sub, err := h.s.Subscribe(context.Background(), SubscribeRequest{AfterSeq: 1, JournalID: h.s.JournalID()})
	if err != nil {
		t.Fatalf("cursor of this journal: %v", err)
	}
	sub.Close()
}
