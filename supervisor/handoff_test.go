package supervisor

import (
	"context"
	"strings"
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

// TestStoredOnlyReplayDoesNotWaitForTheLoop: a stored-only replay (by time
// or by seq, cursor checks included) is answered while the loop is busy
// with a slow task, and holds every event committed before it; a bad seq
// cursor is still refused. A live subscription still needs the loop.
func TestStoredOnlyReplayDoesNotWaitForTheLoop(t *testing.T) {
	h := newHarness(t, newFakeRuntime(), t.TempDir())
	h.create("a")
	h.create("b")
	want := h.expect("start-container a", "start-container b")
	busy, release := make(chan struct{}), make(chan struct{})
	h.s.send(func(*Supervisor) { close(busy); <-release })
	<-busy
	defer close(release)
	for _, tc := range []struct {
		req  SubscribeRequest
		want []journal.Event
	}{
		{SubscribeRequest{After: time.Unix(0, 0), StoredOnly: true}, want},
		{SubscribeRequest{AfterSeq: want[0].Seq, JournalID: h.s.JournalID(), StoredOnly: true}, want[1:]},
	} {
		req := tc.req
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		sub, err := h.s.Subscribe(ctx, req)
		if err != nil {
			cancel()
			t.Fatalf("%+v while the loop is busy: %v", req, err)
		}
		var got []string
		for {
			ev, err := sub.Next(ctx)
			if err != nil {
				break
			}
			got = append(got, describe(ev))
		}
		sub.Close()
		cancel()
		var wantDesc []string
		for _, ev := range tc.want {
			wantDesc = append(wantDesc, describe(ev))
		}
		if strings.Join(got, ",") != strings.Join(wantDesc, ",") {
			t.Fatalf("%+v: replayed %q, want %q", req, got, wantDesc)
		}
	}
	if _, err := h.s.Subscribe(context.Background(), SubscribeRequest{AfterSeq: 1000, StoredOnly: true}); !errdefs.IsFailedPrecondition(err) {
		t.Fatalf("a seq beyond the journal's end while the loop is busy: %v, want FailedPrecondition", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := h.s.Subscribe(ctx, SubscribeRequest{After: time.Unix(0, 0)}); err == nil {
		t.Fatal("a live subscription was registered while the loop was busy")
	}
}
