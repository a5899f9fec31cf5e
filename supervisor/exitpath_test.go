package supervisor

// The exit path's rules on the fake runtime, monitor and clock:
// an init's exit waits for its execs' real exits however long they take,
// an old incarnation's late reports touch nothing of the new one, and a
// flood of creates is bounded without delaying an exit. The same rules on
// real shims and runc are in exitpath_real_test.go.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
)

// awaitArmed waits until the supervisor arms a timer of d (others, such as
// the reconcile timer, are skipped).
func (h *harness) awaitArmed(d time.Duration) {
	h.t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case got := <-h.clock.armed:
			if got == d {
				return
			}
		case <-timeout:
			h.t.Fatalf("no timer of %s armed within 5s", d)
		}
	}
}

func (p *fakeProcess) killCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.kills
}

// loopValue reads the loop's state on the loop.
func loopValue[T any](t *testing.T, s *Supervisor, f func(*Supervisor) T) T {
	t.Helper()
	v, err := call(context.Background(), s, "test", func(done func(T, error)) { done(f(s), nil) })
	must(t, err)
	return v
}

// TestExecThatSurvivesSIGKILLHoldsInitExit: an exec that outlives its init
// and does not die of SIGKILL (uninterruptible sleep) is killed again every
// ExecGrace; nothing is published on a timer. When it dies at last, its exit
// then the init's are published, each once.
func TestExecThatSurvivesSIGKILLHoldsInitExit(t *testing.T) {
	h := newHarness(t, newFakeRuntime(), t.TempDir())
	grace := 10 * time.Second // Config.ExecGrace's default
	a := h.create("a")
	e1 := h.exec(a, "e1")
	h.expect("start-container a", "start-process a e1")
	h.kill(a.proc("init"), 137)
	// The init's exit kills the exec, then arms the grace timer.
	h.awaitArmed(grace)
	if n := e1.killCount(); n != 1 {
		t.Fatalf("exec SIGKILLed %d times at the init's exit, want 1", n)
	}
	for round := 2; round <= 4; round++ {
		h.clock.Advance(grace + time.Millisecond)
		h.awaitArmed(grace)
		if n := e1.killCount(); n != round {
			t.Fatalf("after %d grace periods the exec was SIGKILLed %d times, want %d", round-1, n, round)
		}
	}
	// Nothing was published meanwhile: the next events are the exec's
	// exit, then the init's.
	h.kill(e1, 137)
	h.expect("exit a e1 137", "exit a init 137")
	// The pending grace timer fires into nothing: no kill, no event; the
	// id is free and the next event is the new container's.
	h.clock.Advance(grace + time.Millisecond)
	h.create("a")
	h.expect("start-container a")
	if n := e1.killCount(); n != 4 {
		t.Fatalf("exec SIGKILLed %d times in all, want 4 (none after its exit)", n)
	}
}

// TestLateReportOfOldIncarnationTouchesNothing: once an id is reused, the
// old incarnation's processes reported again (a late duplicate, as from
// reconcile) publish nothing, and leave the new container's state and OOM
// watch as they are. (An old exec cannot really exit after the reuse: the
// init's exit, which frees the id, waits for its execs.)
func TestLateReportOfOldIncarnationTouchesNothing(t *testing.T) {
	rt := newFakeRuntime()
	h := newHarness(t, rt, t.TempDir())
	old := h.create("a")
	oldExec := h.exec(old, "e1")
	h.kill(oldExec, 1)
	h.kill(old.proc("init"), 137)
	h.expect("start-container a", "start-process a e1", "exit a e1 1", "exit a init 137")
	c := h.create("a")
	h.exec(c, "e1") // same exec id as the old incarnation's
	h.expect("start-container a", "start-process a e1")
	_, stopped := h.mon.oomCalls()
	if len(stopped) != 1 || stopped[0] != "a" {
		t.Fatalf("StopOOM calls %v, want one for a (the old init's exit)", stopped)
	}

	h.mon.exits <- oldExec
	h.mon.exits <- old.proc("init")

	// The next event is the new incarnation's: nothing was published for
	// the old reports (the monitor's channel is read in order, so they were
	// handled before the update).
	must(t, h.s.Update(context.Background(), UpdateRequest{ID: "a", Status: StatusPaused}))
	h.expect("pause a")
	infos, err := h.s.State(context.Background(), "a")
	must(t, err)
	if len(infos) != 1 || infos[0].Status != StatusPaused || infos[0].Incarnation != c.inc || len(infos[0].Processes) != 2 {
		t.Fatalf("new incarnation after the old one's late reports: %+v, want paused %s with init and e1", infos, c.inc)
	}
	watched, stopped := h.mon.oomCalls()
	if len(stopped) != 1 || len(watched) != 2 {
		t.Fatalf("OOM watches started %v, stopped %v: want 2 started and only the old one stopped", watched, stopped)
	}
	// The new incarnation's OOMs and exits are still its own.
	h.mon.ooms <- "a"
	h.expect("oom a")
	h.kill(c.proc("e1"), 2)
	h.kill(c.proc("init"), 9)
	h.expect("exit a e1 2", "exit a init 9")
	if _, stopped := h.mon.oomCalls(); len(stopped) != 2 {
		t.Fatalf("StopOOM calls %v, want 2 (one per incarnation's init exit)", stopped)
	}
	assertNoMore(t, h)
}

// TestCreateFloodIsBoundedAndExitsGoOn: with every worker of the runtime
// lane held by a create hung in the runtime, a flood of 1,000 creates gets
// ResourceExhausted for what does not fit in the per-id queues, and an exit
// is still published during the flood.
func TestCreateFloodIsBoundedAndExitsGoOn(t *testing.T) {
	rt := newFakeRuntime()
	h := newHarness(t, rt, t.TempDir())
	ctx := context.Background()
	x := h.create("x")
	h.expect("start-container x")
	waitPendingZero(t, h.s) // x's mark-started step is done and counted out

	gate := make(chan struct{})
	rt.mu.Lock()
	rt.createGate = gate
	rt.mu.Unlock()
	released := false
	t.Cleanup(func() {
		if !released {
			close(gate) // before the supervisor stops (cleanups run last first)
		}
	})

	const flood = 1000
	results := make(chan error, flood)
	for i := 0; i < flood; i++ {
		go func() {
			_, err := h.s.CreateContainer(ctx, CreateRequest{ID: fmt.Sprintf("f%d", i), Bundle: "/b"})
			results <- err
		}()
	}
	for refused := 0; refused < flood-maxPending; refused++ {
		select {
		case err := <-results:
			wantBusy(t, err)
		case <-time.After(20 * time.Second):
			t.Fatalf("%d creates refused within 20s, want %d", refused, flood-maxPending)
		}
	}
	if n := loopValue(t, h.s, func(s *Supervisor) int { return s.pending }); n != maxPending {
		t.Fatalf("%d steps pending during the flood, want the bound, %d", n, maxPending)
	}
	// The runtime lane is full and its queues at their bound: an exit is
	// published all the same, and one more create is refused.
	h.kill(x.proc("init"), 0)
	h.expect("exit x init 0")
	_, err := h.s.CreateContainer(ctx, CreateRequest{ID: "one-more", Bundle: "/b"})
	wantBusy(t, err)

	close(gate)
	released = true
	for i := 0; i < maxPending; i++ {
		select {
		case err := <-results:
			if err != nil {
				t.Fatalf("an admitted create failed once the runtime answered: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%d of the %d admitted creates done within 20s of the runtime answering", i, maxPending)
		}
	}
}

func wantBusy(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), "daemon busy") {
		t.Fatalf("got %v, want ResourceExhausted (daemon busy)", err)
	}
}

// waitPendingZero waits until no step is pending in the per-id queues. No
// event says a step's result was applied on the loop, so this polls.
func waitPendingZero(t *testing.T, s *Supervisor) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for loopValue(t, s, func(s *Supervisor) int { return s.pending }) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("steps still pending after 5s")
		}
		time.Sleep(time.Millisecond)
	}
}
