//go:build failpoints

package supervisor

import (
	"context"
	"errors"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/supervisor/journal"
)

// TestFsyncFailureHoldsTheBatch makes the journal's fsync fail (EIO) when an
// exit is journaled: the exit is not published nor replayable nor marked as
// published, creates are refused naming EIO; once fsync works again the exit
// is journaled (the untrusted segment rewritten first) and published once,
// and a restarted daemon replays exactly what was published live.
func TestFsyncFailureHoldsTheBatch(t *testing.T) {
	for _, policy := range []journal.SyncPolicy{journal.SyncBatch, journal.SyncAlways} {
		t.Run(policy.String(), func(t *testing.T) {
			var broken atomic.Bool
			testJournalOptions = func(o journal.Options) journal.Options {
				return journal.WithSyncFault(o, func() error {
					if broken.Load() {
						return syscall.EIO
					}
					return nil
				})
			}
			t.Cleanup(func() { testJournalOptions = nil })
			rt, dir := newFakeRuntime(), t.TempDir()
			h := newHarnessWith(t, rt, dir, func(c *Config) { c.SyncPolicy = policy })
			a := h.create("a")
			live := h.expect("start-container a")

			broken.Store(true)
			h.kill(a.proc("init"), 7)
			waitGauge(t, h.s, "journal-held-events", 1)
			if gaugeValue(t, h.s, "journal-degraded") != 1 {
				t.Fatal("not degraded after a failed fsync")
			}
			if got := storedEvents(t, h.s); len(got) != len(live) {
				t.Fatalf("an exit whose fsync failed is replayable: %d events stored, %d published", len(got), len(live))
			}
			if a.proc("init").ExitPublished() {
				t.Fatal("an exit whose fsync failed is marked as published")
			}
			_, err := h.s.CreateContainer(context.Background(), CreateRequest{ID: "b", Bundle: "/b"})
			if !errors.Is(err, syscall.EIO) || !errdefs.IsUnavailable(err) {
				t.Fatalf("create while fsync fails: %v, want unavailable with EIO", err)
			}

			broken.Store(false)
			h.clock.Advance(maxHeldRetry)
			live = append(live, h.expect("exit a init 7")...)
			rt.waitFor(t, "a deleted after its journaled exit", a.isDeleted)
			assertStoredEqual(t, storedEvents(t, h.s), live)

			testJournalOptions = nil
			must(t, h.s.Stop())
			h2 := newHarness(t, rt, dir)
			assertStoredEqual(t, storedEvents(t, h2.s), live)
		})
	}
}

// TestHeldQueueBounded: while the journal cannot write, the loop holds at
// most maxHeldEvents events; past that an OOM (or exit) waits in the
// monitor, and is taken once the held events are journaled.
func TestHeldQueueBounded(t *testing.T) {
	var broken atomic.Bool
	testJournalOptions = func(o journal.Options) journal.Options {
		return journal.WithSyncFault(o, func() error {
			if broken.Load() {
				return syscall.EIO
			}
			return nil
		})
	}
	t.Cleanup(func() { testJournalOptions = nil })
	h := newHarnessWith(t, newFakeRuntime(), t.TempDir(), func(c *Config) {
		c.SyncPolicy = journal.SyncBatch
		c.SubscriberBuffer = 2 * maxHeldEvents
	})
	h.create("a")
	h.expect("start-container a")
	broken.Store(true)
	for i := 0; i < maxHeldEvents; i++ {
		h.mon.ooms <- "a"
	}
	waitGauge(t, h.s, "journal-held-events", maxHeldEvents)
	select {
	case h.mon.ooms <- "a":
		t.Fatal("the loop took an OOM past the held queue's bound")
	case <-time.After(100 * time.Millisecond):
	}
	broken.Store(false)
	h.clock.Advance(maxHeldRetry)
	select {
	case h.mon.ooms <- "a":
	case <-time.After(5 * time.Second):
		t.Fatal("the loop takes no OOM after the held events were journaled")
	}
	want := make([]string, maxHeldEvents+1)
	for i := range want {
		want[i] = "oom a"
	}
	h.expect(want...)
	waitGauge(t, h.s, "journal-held-events", 0)
}
