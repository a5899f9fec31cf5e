package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	metrics "github.com/rcrowley/go-metrics"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/supervisor/journal"
	"github.com/evjournal/containerd/supervisor/objects"
)

func gaugeValue(t *testing.T, s *Supervisor, name string) int64 {
	t.Helper()
	g, ok := s.Metrics().Get(name).(metrics.Gauge)
	if !ok {
		t.Fatalf("no gauge %q", name)
	}
	return g.Value()
}

// waitGauge waits until the gauge reads want (the loop updates it
// asynchronously: an exit is handled on a worker first).
func waitGauge(t *testing.T, s *Supervisor, name string, want int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for gaugeValue(t, s, name) != want {
		if time.Now().After(deadline) {
			t.Fatalf("gauge %s = %d, want %d", name, gaugeValue(t, s, name), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkJournalError asserts a refusal that names the journal and ENOSPC.
func checkJournalError(t *testing.T, err error, dir string) {
	t.Helper()
	if !journalErrorCheck(t, err, dir) {
		t.FailNow()
	}
}

// journalErrorCheck is checkJournalError for any goroutine: it reports a
// wrong error with t.Errorf and returns false.
func journalErrorCheck(t *testing.T, err error, dir string) bool {
	t.Helper()
	if err == nil {
		t.Error("request accepted while the journal is full")
		return false
	}
	if !errors.Is(err, syscall.ENOSPC) || !errdefs.IsUnavailable(err) ||
		!strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "ENOSPC") {
		t.Errorf("error %q: want an unavailable error naming %s and ENOSPC", err, dir)
		return false
	}
	return true
}

// storedEvents replays the whole journal.
func storedEvents(t *testing.T, s *Supervisor) []journal.Event {
	t.Helper()
	sub, err := s.Subscribe(context.Background(), SubscribeRequest{After: time.Unix(0, 0), StoredOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var out []journal.Event
	for {
		ev, err := sub.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
}

// TestJournalFullHoldsEventsAndRecovers fills the journal's disk under a
// daemon with containers: nothing is published that is not journaled, the
// request under way when the disk fills and the later ones are refused with
// an error naming the journal and ENOSPC, exits wait in memory without their
// exit-published marker, and once space is freed they are journaled and
// published once, in order, without a restart.
func TestJournalFullHoldsEventsAndRecovers(t *testing.T) {
	for _, policy := range []journal.SyncPolicy{journal.SyncBatch, journal.SyncAlways, journal.SyncNone} {
		t.Run(policy.String(), func(t *testing.T) { testJournalFull(t, policy) })
	}
}

func testJournalFull(t *testing.T, policy journal.SyncPolicy) {
	jdir := fixture.SmallTmpfs(t, "256k")
	rt := newFakeRuntime()
	h := newHarnessWith(t, rt, t.TempDir(), func(c *Config) { c.JournalDir, c.SyncPolicy = jdir, policy })
	a := h.create("a")
	e1 := h.exec(a, "e1")
	live := h.expect("start-container a", "start-process a e1")
	filler := fixture.FillFS(t, jdir)

	// Creates succeed while the last page of the segment has room, then
	// one fails: it was under way, so its container is killed.
	var failed string
	for i := 0; failed == "" && i < 200; i++ {
		id := "b" + strings.Repeat("x", 40) + string(rune('a'+i%26)) + string(rune('a'+i/26))
		_, err := h.s.CreateContainer(context.Background(), CreateRequest{ID: id, Bundle: "/b"})
		if err == nil {
			live = append(live, h.expect("start-container "+id)...)
			continue
		}
		checkJournalError(t, err, jdir)
		failed = id
	}
	if failed == "" {
		t.Fatal("the journal never filled up")
	}
	rt.mu.Lock()
	b := rt.live[failed]
	rt.mu.Unlock()
	binit := b.proc("init")
	binit.mu.Lock()
	killed := binit.killed
	binit.mu.Unlock()
	if !killed {
		t.Fatal("the container whose create was refused is still running")
	}
	if gaugeValue(t, h.s, "journal-degraded") != 1 {
		t.Fatal("journal-degraded gauge is not 1 while the journal is full")
	}

	// Degraded: new requests that create events are refused up front...
	_, err := h.s.CreateContainer(context.Background(), CreateRequest{ID: "z", Bundle: "/b"})
	checkJournalError(t, err, jdir)
	_, err = h.s.Exec(context.Background(), ExecRequest{ID: "a", Pid: "e2"})
	checkJournalError(t, err, jdir)
	checkJournalError(t, h.s.Update(context.Background(), UpdateRequest{ID: "a", Status: StatusPaused}), jdir)
	must(t, h.s.ReserveObject(context.Background(), ObjectSpec{Kind: objects.Sandbox, ID: "cri1", Name: "pod/cri1"}))
	_, err = h.s.CommitObject(context.Background(), "cri1")
	checkJournalError(t, err, jdir)
	// ...reads still work...
	if _, err := h.s.State(context.Background(), ""); err != nil {
		t.Fatalf("State while degraded: %v", err)
	}
	// ...and exits wait, unpublished, with no exit-published marker.
	h.kill(e1, 3)
	h.kill(a.proc("init"), 0)
	waitGauge(t, h.s, "journal-held-events", 3) // b's start-container, e1's and a's exits
	h.kill(b.proc("init"), 137)
	waitGauge(t, h.s, "journal-held-events", 4)
	if e1.ExitPublished() || a.proc("init").ExitPublished() {
		t.Fatal("an exit that is not journaled is marked as published")
	}
	if got := storedEvents(t, h.s); len(got) != len(live) {
		t.Fatalf("journal holds %d events while full, %d were published live", len(got), len(live))
	}

	// Space comes back: the next retry journals and publishes them.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(maxHeldRetry)
	live = append(live, h.expect("start-container "+failed, "exit a e1 3", "exit a init 0", "exit "+failed+" init 137")...)
	waitGauge(t, h.s, "journal-degraded", 0)
	if _, err := h.s.CreateContainer(context.Background(), CreateRequest{ID: "z", Bundle: "/b"}); err != nil {
		t.Fatalf("create after recovery: %v", err)
	}
	live = append(live, h.expect("start-container z")...)

	// What was seen live is exactly what the journal holds.
	assertStoredEqual(t, storedEvents(t, h.s), live)
	rt.waitFor(t, "a deleted after its journaled exit", a.isDeleted)
	if !e1.ExitPublished() || !a.proc("init").ExitPublished() {
		t.Fatal("journaled exits not marked as published")
	}
}

func assertStoredEqual(t *testing.T, stored, live []journal.Event) {
	t.Helper()
	if len(stored) != len(live) {
		t.Fatalf("journal holds %d events, %d were published live", len(stored), len(live))
	}
	for i := range live {
		if live[i].Seq == 0 || live[i] != stored[i] {
			t.Fatalf("event %d: published %+v, journaled %+v", i, live[i], stored[i])
		}
	}
}

// TestStopWhileDegradedReplaysHeldExits: a daemon stopped while an exit is
// held (never journaled, never marked as published) replays that exit once
// at its next start, when the journal can write again.
func TestStopWhileDegradedReplaysHeldExits(t *testing.T) {
	jdir := fixture.SmallTmpfs(t, "256k")
	rt, dir := newFakeRuntime(), t.TempDir()
	h := newHarnessWith(t, rt, dir, func(c *Config) { c.JournalDir = jdir })
	a := h.create("a")
	h.expect("start-container a")
	filler := fixture.FillFS(t, jdir)
	// Fill the segment's last page too: creates until one is refused.
	for i := 0; i < 200; i++ {
		if _, err := h.s.CreateContainer(context.Background(), CreateRequest{ID: fmt.Sprintf("p%d", i), Bundle: "/b"}); err != nil {
			checkJournalError(t, err, jdir)
			break
		}
		h.expect(fmt.Sprintf("start-container p%d", i))
	}
	h.kill(a.proc("init"), 9)
	waitGauge(t, h.s, "journal-held-events", 2) // the refused create's start and a's exit
	h.s.Stop()
	if a.proc("init").ExitPublished() {
		t.Fatal("a held exit was marked as published")
	}
	must(t, os.Remove(filler))

	h2 := newHarnessWith(t, rt, dir, func(c *Config) { c.JournalDir = jdir })
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ev, err := h2.sub.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("waiting for a's replayed exit: %v", err)
		}
		if ev.Type == journal.TypeExit && ev.ID == "a" {
			break
		}
	}
	var exits int
	for _, ev := range storedEvents(t, h2.s) {
		if ev.Type == journal.TypeExit && ev.ID == "a" {
			exits++
		}
	}
	if exits != 1 {
		t.Fatalf("a's exit journaled %d times after the restart, want 1", exits)
	}
}
