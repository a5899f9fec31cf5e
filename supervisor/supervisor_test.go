package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"github.com/evjournal/containerd/specs"
	"github.com/evjournal/containerd/supervisor/journal"
)

type harness struct {
	t     *testing.T
	s     *Supervisor
	rt    *fakeRuntime
	mon   *fakeMonitor
	clock *fakeClock
	dir   string
	sub   *Subscription
}

func newHarness(t *testing.T, rt *fakeRuntime, dir string) *harness {
	t.Helper()
	return newHarnessWith(t, rt, dir, nil)
}

// newHarnessWith is newHarness with the config changed by edit first.
func newHarnessWith(t *testing.T, rt *fakeRuntime, dir string, edit func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, rt: rt, mon: newFakeMonitor(), clock: newFakeClock(), dir: dir}
	cfg := Config{StateDir: dir, SyncPolicy: testSync, RuntimeImpl: rt, MonitorImpl: h.mon, Clock: h.clock,
		ReconcileInterval: time.Minute, SubscriberBuffer: 64}
	if edit != nil {
		edit(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.s = s
	// Subscribe from the journal's start so restore's events are seen too.
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.sub, err = s.Subscribe(context.Background(), SubscribeRequest{After: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })
	return h
}

// expect reads the next events and compares them with want, written as
// "type id [pid status]".
func (h *harness) expect(want ...string) []journal.Event {
	h.t.Helper()
	var got []journal.Event
	for _, w := range want {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ev, err := h.sub.Next(ctx)
		cancel()
		if err != nil {
			h.t.Fatalf("waiting for %q: %v", w, err)
		}
		if s := describe(ev); s != w {
			h.t.Fatalf("event %d: got %q, want %q", len(got), s, w)
		}
		got = append(got, ev)
	}
	return got
}

func describe(ev journal.Event) string {
	if ev.Type == journal.TypeExit {
		return fmt.Sprintf("%s %s %s %d", ev.Type, ev.ID, ev.Pid, ev.Status)
	}
	if ev.Type == journal.TypeStartProcess {
		return fmt.Sprintf("%s %s %s", ev.Type, ev.ID, ev.Pid)
	}
	return ev.Type + " " + ev.ID
}

func (h *harness) create(id string) *fakeContainer {
	h.t.Helper()
	if _, err := h.s.CreateContainer(context.Background(), CreateRequest{ID: id, Bundle: "/b"}); err != nil {
		h.t.Fatalf("create %s: %v", id, err)
	}
	h.rt.mu.Lock()
	defer h.rt.mu.Unlock()
	return h.rt.live[id]
}

func (h *harness) exec(c *fakeContainer, pid string) *fakeProcess {
	h.t.Helper()
	if _, err := h.s.Exec(context.Background(), ExecRequest{ID: c.id, Pid: pid}); err != nil {
		h.t.Fatalf("exec %s: %v", pid, err)
	}
	h.rt.mu.Lock()
	defer h.rt.mu.Unlock()
	return c.procs[pid]
}

// kill makes p exit with status and has the monitor report it.
func (h *harness) kill(p *fakeProcess, status uint32) {
	p.die(status)
	h.mon.exits <- p
}

func TestOrdering(t *testing.T) {
	tests := []struct {
		name string
		run  func(h *harness)
		want []string
	}{
		{"short container", func(h *harness) {
			c := h.create("a")
			h.kill(c.proc("init"), 0)
		}, []string{"start-container a", "exit a init 0"}},
		{"exec exits come before init exit even when init dies first", func(h *harness) {
			c := h.create("a")
			e1, e2 := h.exec(c, "e1"), h.exec(c, "e2")
			h.kill(c.proc("init"), 143)
			h.kill(e2, 137)
			h.kill(e1, 137)
		}, []string{"start-container a", "start-process a e1", "start-process a e2",
			"exit a e2 137", "exit a e1 137", "exit a init 143"}},
		{"oom before exit", func(h *harness) {
			c := h.create("a")
			h.mon.ooms <- "a"
			h.kill(c.proc("init"), 137)
		}, []string{"start-container a", "oom a", "exit a init 137"}},
		{"duplicate exit report is handled once", func(h *harness) {
			c := h.create("a")
			e1 := h.exec(c, "e1")
			h.kill(e1, 1)
			h.mon.exits <- e1
			h.kill(c.proc("init"), 0)
			h.mon.exits <- c.proc("init")
		}, []string{"start-container a", "start-process a e1", "exit a e1 1", "exit a init 0"}},
		{"pause and resume", func(h *harness) {
			h.create("a")
			must(h.t, h.s.Update(context.Background(), UpdateRequest{ID: "a", Status: StatusPaused}))
			must(h.t, h.s.Update(context.Background(), UpdateRequest{ID: "a", Status: StatusRunning}))
		}, []string{"start-container a", "pause a", "resume a"}},
		{"id reusable at once after the exit; a late exit of the old one is ignored", func(h *harness) {
			old := h.create("a")
			h.kill(old.proc("init"), 3)
			h.expect("start-container a", "exit a init 3")
			c := h.create("a")
			h.mon.exits <- old.proc("init")
			h.kill(c.proc("init"), 4)
		}, []string{"start-container a", "exit a init 4"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, newFakeRuntime(), t.TempDir())
			tc.run(h)
			h.expect(tc.want...)
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestBadRequests(t *testing.T) {
	h := newHarness(t, newFakeRuntime(), t.TempDir())
	ctx := context.Background()
	h.create("a")
	cases := []struct {
		name  string
		err   error
		class error
		text  string
	}{
		{"duplicate id", second(h.s.CreateContainer(ctx, CreateRequest{ID: "a", Bundle: "/b"})), errdefs.ErrAlreadyExists, "file exists"},
		{"bad id", second(h.s.CreateContainer(ctx, CreateRequest{ID: "../x", Bundle: "/b"})), errdefs.ErrInvalidArgument, ""},
		{"unknown container signal", h.s.Signal(ctx, "nope", "init", 9), errdefs.ErrNotFound, "containerd: container not found"},
		{"unknown process", h.s.Signal(ctx, "a", "nope", 9), errdefs.ErrNotFound, "containerd: process not found for container"},
		{"unknown status", h.s.Update(ctx, UpdateRequest{ID: "a", Status: "frozen"}), errdefs.ErrInvalidArgument, "containerd: unknown container status "},
		{"exec duplicate init", second(h.s.Exec(ctx, ExecRequest{ID: "a", Pid: "init"})), errdefs.ErrAlreadyExists, "file exists"},
		{"stored only without time", second(h.s.Subscribe(ctx, SubscribeRequest{StoredOnly: true})), errdefs.ErrInvalidArgument, "StoredOnly"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !errors.Is(c.err, c.class) {
				t.Fatalf("got %v, want class %v", c.err, c.class)
			}
			if !strings.Contains(c.err.Error(), c.text) {
				t.Fatalf("got %q, want it to contain %q", c.err, c.text)
			}
		})
	}
	h.expect("start-container a")
}

func second[T any](_ T, err error) error { return err }

func TestFailedStartPublishesNothingAndFreesID(t *testing.T) {
	rt := newFakeRuntime()
	h := newHarness(t, rt, t.TempDir())
	rt.failStart = errors.New("oci runtime error: boom")
	_, err := h.s.CreateContainer(context.Background(), CreateRequest{ID: "a", Bundle: "/b"})
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("got %v, want the runtime's error", err)
	}
	rt.mu.Lock()
	rt.failStart = nil
	rt.mu.Unlock()
	h.create("a")
	h.expect("start-container a")
}

func TestRetryWithBackoffKeepsOrderAndOthersGoOn(t *testing.T) {
	rt := newFakeRuntime()
	h := newHarness(t, rt, t.TempDir())
	a := h.create("a")
	h.expect("start-container a")
	<-h.clock.armed // reconcile timer
	rt.mu.Lock()
	rt.failRetire["a"] = 2
	rt.mu.Unlock()
	h.kill(a.proc("init"), 9)
	if d := <-h.clock.armed; d != time.Second {
		t.Fatalf("first retry after %s, want 1s", d)
	}
	// Another container is not held up by a's backoff.
	b := h.create("b")
	h.kill(b.proc("init"), 0)
	h.expect("start-container b", "exit b init 0")
	h.clock.Advance(time.Second)
	if d := <-h.clock.armed; d != 2*time.Second {
		t.Fatalf("second retry after %s, want 2s", d)
	}
	h.clock.Advance(2 * time.Second)
	h.expect("exit a init 9")
	if got := backoff(20); got != maxBackoff {
		t.Fatalf("backoff cap: got %s", got)
	}
}

func TestReconcileFindsMissedExitOnce(t *testing.T) {
	h := newHarness(t, newFakeRuntime(), t.TempDir())
	a := h.create("a")
	h.expect("start-container a")
	<-h.clock.armed
	a.proc("init").die(7) // the monitor never reports it
	h.clock.Advance(time.Minute)
	h.expect("exit a init 7")
	h.mon.exits <- a.proc("init") // a late report changes nothing
	b := h.create("b")
	h.expect("start-container b")
	_ = b
}

func TestReplayStrictlyAfterThenLive(t *testing.T) {
	h := newHarness(t, newFakeRuntime(), t.TempDir())
	a := h.create("a")
	e := h.exec(a, "e1")
	evs := h.expect("start-container a", "start-process a e1")
	sub, err := h.s.Subscribe(context.Background(), SubscribeRequest{After: evs[0].Timestamp})
	must(t, err)
	h.kill(e, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, want := range []string{"start-process a e1", "exit a e1 1"} {
		ev, err := sub.Next(ctx)
		must(t, err)
		if describe(ev) != want {
			t.Fatalf("got %q want %q", describe(ev), want)
		}
	}
	stored, err := h.s.Subscribe(ctx, SubscribeRequest{After: evs[1].Timestamp, StoredOnly: true, ID: "a"})
	must(t, err)
	ev, err := stored.Next(ctx)
	if err != nil || describe(ev) != "exit a e1 1" {
		t.Fatalf("stored-only: %v %v", describe(ev), err)
	}
	if _, err := stored.Next(ctx); err != io.EOF {
		t.Fatalf("stored-only end: got %v, want EOF", err)
	}
}

func TestSlowSubscriberCutOffOthersGoOn(t *testing.T) {
	h := newHarness(t, newFakeRuntime(), t.TempDir())
	slow, err := h.s.Subscribe(context.Background(), SubscribeRequest{})
	must(t, err)
	a := h.create("a")
	want := []string{"start-container a"}
	h.expect(want...)
	for i := 0; i < 100; i++ { // more than the 64-event buffer
		must(t, h.s.Update(context.Background(), UpdateRequest{ID: "a", Status: StatusPaused}))
		h.expect("pause a") // the fast subscriber keeps up and sees everything
		want = append(want, "pause a")
	}
	h.kill(a.proc("init"), 0)
	want = append(want, "exit a init 0")
	h.expect("exit a init 0")
	ctx := context.Background()
	var last journal.Event
	for {
		ev, err := slow.Next(ctx)
		if err != nil {
			var lag *LagError
			if !errors.As(err, &lag) {
				t.Fatalf("got %v, want a LagError", err)
			}
			if lag.LastSeq != last.Seq {
				t.Fatalf("resume point seq %d, but last delivered was %d", lag.LastSeq, last.Seq)
			}
			// Resuming from the journal after the point gives the rest.
			rest, err := h.s.Subscribe(ctx, SubscribeRequest{AfterSeq: lag.LastSeq, StoredOnly: true})
			must(t, err)
			n := 0
			for {
				if _, err := rest.Next(ctx); err != nil {
					break
				}
				n++
			}
			if int(last.Seq)+n != len(want) {
				t.Fatalf("delivered %d + resumed %d != %d events", last.Seq, n, len(want))
			}
			return
		}
		last = ev
	}
}

func TestFailedCleanupIsRetriedAndIDWaits(t *testing.T) {
	rt := newFakeRuntime()
	h := newHarness(t, rt, t.TempDir())
	<-h.clock.armed // reconcile timer
	rt.mu.Lock()
	rt.failStart = errors.New("oci runtime error: boom")
	rt.failDelete = 2 // the cleanup in the create, then the first retry
	rt.mu.Unlock()
	if _, err := h.s.CreateContainer(context.Background(), CreateRequest{ID: "a", Bundle: "/b"}); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("got %v, want the start error", err)
	}
	rt.mu.Lock()
	rt.failStart = nil
	rt.mu.Unlock()
	// The cleanup's retry waits for its backoff; a new create of the id
	// waits behind it, then succeeds.
	done := make(chan error, 1)
	go func() {
		_, err := h.s.CreateContainer(context.Background(), CreateRequest{ID: "a", Bundle: "/b"})
		done <- err
	}()
	if d := <-h.clock.armed; d != time.Second {
		t.Fatalf("cleanup retry after %s, want 1s", d)
	}
	h.clock.Advance(time.Second)
	must(t, <-done)
	h.expect("start-container a")
}

func TestResumeBySeqPastRetentionIsRefused(t *testing.T) {
	mon, clock := newFakeMonitor(), newFakeClock()
	s, err := New(Config{StateDir: t.TempDir(), SyncPolicy: testSync, RuntimeImpl: newFakeRuntime(), MonitorImpl: mon, Clock: clock,
		RetainCount: 10, ReconcileInterval: -1})
	must(t, err)
	must(t, s.Start(context.Background()))
	defer s.Stop()
	ctx := context.Background()
	_, err = s.CreateContainer(ctx, CreateRequest{ID: "a", Bundle: "/b"})
	must(t, err)
	for i := 0; i < 200; i++ { // far past the retain count: compaction drops the oldest
		must(t, s.Update(ctx, UpdateRequest{ID: "a", Status: StatusPaused}))
	}
	_, err = s.Subscribe(ctx, SubscribeRequest{AfterSeq: 1})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "no longer retained") {
		t.Fatalf("resume after seq 1: got %v, want a no-longer-retained error", err)
	}
	if _, err := s.Subscribe(ctx, SubscribeRequest{AfterSeq: 195}); err != nil {
		t.Fatalf("resume within the retained events: %v", err)
	}
}

// TestCleanupThatNeverSucceedsGivesUp: a failed create whose runtime fails
// every delete (a runtime such as /bin/false) is retried a bounded number
// of times, then discarded; the id is free again.
func TestCleanupThatNeverSucceedsGivesUp(t *testing.T) {
	rt := newFakeRuntime()
	h := newHarness(t, rt, t.TempDir())
	<-h.clock.armed // reconcile timer
	rt.mu.Lock()
	rt.failStart = errors.New("oci runtime error: boom")
	rt.failDelete = 1 << 30
	rt.mu.Unlock()
	if _, err := h.s.CreateContainer(context.Background(), CreateRequest{ID: "a", Bundle: "/b"}); err == nil {
		t.Fatal("create succeeded")
	}
	rt.mu.Lock()
	rt.failStart = nil
	rt.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		_, err := h.s.CreateContainer(context.Background(), CreateRequest{ID: "a", Bundle: "/b"})
		done <- err
	}()
	for _, want := range []time.Duration{time.Second, 2 * time.Second} {
		if d := <-h.clock.armed; d != want {
			t.Fatalf("cleanup retry after %s, want %s", d, want)
		}
		h.clock.Advance(want)
	}
	must(t, <-done)
	h.expect("start-container a")
}

// TestStateSurvivesAContainerEnding: a container whose pids cannot be read
// (it ended during the call) is reported without them; the State of all
// containers does not fail.
func TestStateSurvivesAContainerEnding(t *testing.T) {
	rt := newFakeRuntime()
	h := newHarness(t, rt, t.TempDir())
	h.create("a")
	h.create("b")
	rt.mu.Lock()
	rt.failPids = map[string]bool{"a": true}
	rt.mu.Unlock()
	infos, err := h.s.State(context.Background(), "")
	if err != nil || len(infos) != 2 {
		t.Fatalf("State: %d containers, %v; want both", len(infos), err)
	}
	for _, info := range infos {
		if (info.ID == "a") != (len(info.Pids) == 0) {
			t.Errorf("container %s: pids %v", info.ID, info.Pids)
		}
	}
}

// TestRetainCountBoundsWhatIsServed: with --retain-count 10 no client is
// served more than the last 10 events, whichever way it asks, although
// the journal keeps more (retention removes whole segments).
func TestRetainCountBoundsWhatIsServed(t *testing.T) {
	s, err := New(Config{StateDir: t.TempDir(), SyncPolicy: testSync, RuntimeImpl: newFakeRuntime(), MonitorImpl: newFakeMonitor(), Clock: newFakeClock(),
		RetainCount: 10, ReconcileInterval: -1})
	must(t, err)
	must(t, s.Start(context.Background()))
	defer s.Stop()
	ctx := context.Background()
	_, err = s.CreateContainer(ctx, CreateRequest{ID: "a", Bundle: "/b"})
	must(t, err)
	for i := 0; i < 59; i++ { // 60 events, all in the first segment
		must(t, s.Update(ctx, UpdateRequest{ID: "a", Status: StatusPaused}))
	}
	if n := s.journal.Retained(); n <= 10 {
		t.Fatalf("the journal holds %d events: the test needs more than the retain count", n)
	}
	for name, r := range map[string]SubscribeRequest{
		"after time 0":     {After: time.Unix(0, 0), StoredOnly: true},
		"after time 0, id": {After: time.Unix(0, 0), StoredOnly: true, ID: "a"},
		"after seq 50":     {AfterSeq: 50, StoredOnly: true},
		"after seq 55":     {AfterSeq: 55, StoredOnly: true},
	} {
		sub, err := s.Subscribe(ctx, r)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var seqs []uint64
		for {
			ev, err := sub.Next(ctx)
			if err == io.EOF {
				break
			}
			must(t, err)
			seqs = append(seqs, ev.Seq)
		}
		want := 10
		if r.AfterSeq == 55 {
			want = 5
		}
		if len(seqs) != want || seqs[len(seqs)-1] != 60 {
			t.Errorf("%s: served seqs %v, want the last %d of 60", name, seqs, want)
		}
	}
	// Seq 41..50 are still in the journal, but not served: a resume after
	// 40 would miss them, so it is refused.
	if _, err := s.Subscribe(ctx, SubscribeRequest{AfterSeq: 40}); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("resume after seq 40: %v, want no longer retained", err)
	}
}

// TestExecBoundPerContainer: what one container's execs add to a State
// reply is bounded: an exec past it is refused with ResourceExhausted,
// naming the container and the bound, and fits again once others exited.
func TestExecBoundPerContainer(t *testing.T) {
	h := newHarness(t, newFakeRuntime(), t.TempDir())
	c := h.create("a")
	env := []string{strings.Repeat("x", 200<<10)} // ~200 KiB each: five fit in 1 MiB
	ctx := context.Background()
	var execs []*fakeProcess
	for i := 0; i < 5; i++ {
		if _, err := h.s.Exec(ctx, ExecRequest{ID: "a", Pid: fmt.Sprintf("e%d", i), Spec: specs.ProcessSpec{Env: env}}); err != nil {
			t.Fatalf("exec %d: %v", i, err)
		}
		h.rt.mu.Lock()
		execs = append(execs, c.procs[fmt.Sprintf("e%d", i)])
		h.rt.mu.Unlock()
	}
	_, err := h.s.Exec(ctx, ExecRequest{ID: "a", Pid: "e5", Spec: specs.ProcessSpec{Env: env}})
	if !errdefs.IsResourceExhausted(err) || !strings.Contains(err.Error(), `container "a"`) || !strings.Contains(err.Error(), "1048576") {
		t.Fatalf("sixth big exec: %v, want ResourceExhausted naming the container and the bound", err)
	}
	if _, err := h.s.Exec(ctx, ExecRequest{ID: "a", Pid: "small"}); err != nil {
		t.Fatalf("a small exec still fits: %v", err)
	}
	h.kill(execs[0], 0)
	h.expect("start-container a", "start-process a e0", "start-process a e1", "start-process a e2",
		"start-process a e3", "start-process a e4", "start-process a small", "exit a e0 0")
	if _, err := h.s.Exec(ctx, ExecRequest{ID: "a", Pid: "e5", Spec: specs.ProcessSpec{Env: env}}); err != nil {
		t.Fatalf("after an exit the big exec fits again: %v", err)
	}
}
