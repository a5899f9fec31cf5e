package supervisor

import (
	"context"
	"testing"
	"time"

	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/specs"
	"github.com/evjournal/containerd/supervisor/journal"
)

// scenario: container a with exec e1 and container b run; the daemon stops;
// a's exec and init die while it is down. Returns the runtime and a.
func restoreScenario(t *testing.T, dir string) (*fakeRuntime, *fakeContainer, *fakeContainer) {
	rt := newFakeRuntime()
	h := newHarness(t, rt, dir)
	a := h.create("a")
	h.exec(a, "e1")
	b := h.create("b")
	h.expect("start-container a", "start-process a e1", "start-container b")
	must(t, h.s.Stop())
	a.proc("e1").die(1)
	a.proc("init").die(137)
	return rt, a, b
}

func TestRestoreReplaysDeadExitsOnceAndKeepsLiveOnes(t *testing.T) {
	dir := t.TempDir()
	rt, _, b := restoreScenario(t, dir)
	h := newHarness(t, rt, dir)
	h.expect("start-container a", "start-process a e1", "start-container b",
		"exit a e1 1", "exit a init 137")
	// b is still running and controllable.
	infos, err := h.s.State(context.Background(), "b")
	must(t, err)
	if infos[0].Status != StatusRunning {
		t.Fatalf("b status %q", infos[0].Status)
	}
	h.kill(b.proc("init"), 0)
	h.expect("exit b init 0")
	must(t, h.s.Stop())
	// A third start replays nothing new.
	h3 := newHarness(t, rt, dir)
	h3.expect("start-container a", "start-process a e1", "start-container b",
		"exit a e1 1", "exit a init 137", "exit b init 0")
	assertNoMore(t, h3)
}

// assertNoMore checks, through a stored-only replay of the whole journal,
// that no exit is in it twice.
func assertNoMore(t *testing.T, h *harness) {
	t.Helper()
	sub, err := h.s.Subscribe(context.Background(), SubscribeRequest{After: time.Unix(0, 0), StoredOnly: true})
	must(t, err)
	seen := map[string]int{}
	for {
		ev, err := sub.Next(context.Background())
		if err != nil {
			break
		}
		if ev.Type == journal.TypeExit {
			seen[ev.ID+"/"+ev.Pid+"/"+ev.Incarnation]++
		}
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("exit %s journaled %d times", k, n)
		}
	}
}

func TestRestoreCleansOnlyOurStoppedRuncOrphans(t *testing.T) {
	dir := t.TempDir()
	rt := newFakeRuntime()
	h := newHarness(t, rt, dir)
	a := h.create("a")
	h.create("b")
	h.kill(a.proc("init"), 0)
	h.expect("start-container a", "start-container b", "exit a init 0")
	rt.waitFor(t, "a deleted", a.isDeleted)
	must(t, h.s.Stop())
	rt.mu.Lock()
	rt.runcOrphans = []runtime.RuncContainer{
		{ID: "a", Status: "stopped"},       // ours, no record: removed
		{ID: "b", Status: "running"},       // ours and live: kept
		{ID: "foreign", Status: "stopped"}, // never started by us: kept
	}
	rt.mu.Unlock()
	h2 := newHarness(t, rt, dir)
	// A request after restore is served after the cleanup's queued work.
	h2.create("c")
	h2.expect("start-container a", "start-container b", "exit a init 0", "start-container c")
	rt.waitFor(t, "a runc delete", func() bool { rt.mu.Lock(); defer rt.mu.Unlock(); return len(rt.runcDeleted) > 0 })
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if len(rt.runcDeleted) != 1 || rt.runcDeleted[0] != "a" {
		t.Fatalf("runc deletes %v, want exactly [a]", rt.runcDeleted)
	}
}

func TestRestoreRemovesInterruptedCreate(t *testing.T) {
	dir := t.TempDir()
	rt := newFakeRuntime()
	h := newHarness(t, rt, dir)
	a := h.create("a")
	h.expect("start-container a")
	rt.waitFor(t, "a marked started", a.Started)
	must(t, h.s.Stop())
	// A create the daemon never finished: a record, a process, no start.
	half, err := rt.New(runtime.ContainerOpts{ID: "half"})
	must(t, err)
	_, err = half.Create(context.Background(), runtime.CreateOpts{})
	must(t, err)
	h2 := newHarness(t, rt, dir)
	h2.create("b")
	h2.expect("start-container a", "start-container b")
	rt.waitFor(t, "the half-created container deleted", half.(*fakeContainer).isDeleted)
	infos, err := h2.s.State(context.Background(), "")
	must(t, err)
	if len(infos) != 2 {
		t.Fatalf("state lists %d containers, want a and b only", len(infos))
	}
}

func TestRestoreRemovesInterruptedExec(t *testing.T) {
	dir := t.TempDir()
	rt := newFakeRuntime()
	h := newHarness(t, rt, dir)
	a := h.create("a")
	e1 := h.exec(a, "e1")
	h.expect("start-container a", "start-process a e1")
	rt.waitFor(t, "e1 marked started", e1.Started)
	// An exec whose start the daemon never published (it died first).
	p, err := a.Exec(context.Background(), "e2", specs.ProcessSpec{}, runtime.Stdio{}, runtime.ExecOpts{})
	must(t, err)
	e2 := p.(*fakeProcess)
	must(t, h.s.Stop())
	h2 := newHarness(t, rt, dir)
	h2.expect("start-container a", "start-process a e1")
	rt.waitFor(t, "e2 removed", func() bool { return a.proc("e2") == nil })
	e2.mu.Lock()
	killed := e2.killed
	e2.mu.Unlock()
	if !killed {
		t.Fatal("the interrupted exec was not killed")
	}
	h2.kill(a.proc("e1"), 1)
	h2.kill(a.proc("init"), 0)
	h2.expect("exit a e1 1", "exit a init 0") // and nothing of e2
	assertNoMore(t, h2)
}

// A container whose load hangs past restoreTimeout is not waited for, and
// not dropped: restore goes on with the others, the container's state stays
// in place (not set aside), what the late load opened is closed once it
// returns, and the next start adopts the container.
func TestRestoreLoadTimeoutKeepsContainer(t *testing.T) {
	dir := t.TempDir()
	rt := newFakeRuntime()
	h := newHarness(t, rt, dir)
	slow := h.create("slow")
	h.create("ok")
	h.expect("start-container slow", "start-container ok")
	must(t, h.s.Stop())

	gate := make(chan struct{})
	rt.mu.Lock()
	rt.loadGate = map[string]chan struct{}{"slow": gate}
	rt.mu.Unlock()
	t0 := time.Now()
	h2 := newHarness(t, rt, dir)
	if d := time.Since(t0); d > restoreTimeout+5*time.Second {
		t.Errorf("restore took %v, bounded by %v per container", d, restoreTimeout)
	}
	if _, err := h2.s.State(context.Background(), "ok"); err != nil {
		t.Errorf("the container that loaded was not adopted: %v", err)
	}
	rt.mu.Lock()
	_, kept := rt.live["slow"]
	rt.mu.Unlock()
	if !kept {
		t.Fatal("the container whose load timed out was set aside")
	}
	close(gate) // the hung load returns: its processes must be closed
	init := slow.proc("init")
	rt.waitFor(t, "the late load's processes closed", func() bool {
		init.mu.Lock()
		defer init.mu.Unlock()
		return init.closed > 0
	})
	must(t, h2.s.Stop())

	rt.mu.Lock()
	rt.loadGate = nil
	rt.mu.Unlock()
	h3 := newHarness(t, rt, dir)
	infos, err := h3.s.State(context.Background(), "slow")
	if err != nil || infos[0].Status != StatusRunning {
		t.Fatalf("next start: State(slow) = %v, %v; want it adopted, running", infos, err)
	}
}
