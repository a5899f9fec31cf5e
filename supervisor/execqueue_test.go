package supervisor

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/specs"
)

// execAsync runs an Exec on a goroutine; its error comes on the channel.
func (h *harness) execAsync(r ExecRequest) <-chan error {
	ch := make(chan error, 1)
	go func() {
		_, err := h.s.Exec(context.Background(), r)
		ch <- err
	}()
	return ch
}

// awaitErr waits, bounded, for an async call's result.
func awaitErr(t *testing.T, what string, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no answer within 5s", what)
		return nil
	}
}

// queueOf is a copy of what the work queue of id holds, read in the loop:
// the names of its steps, whether its head runs, and its exec starts under
// way ("" steps and 0 when it has no queue).
func (h *harness) queueOf(id string) (steps []string, running bool, execs int) {
	type snap struct {
		steps   []string
		running bool
		execs   int
	}
	v := loopValue(h.t, h.s, func(s *Supervisor) snap {
		q := s.queues[id]
		if q == nil {
			return snap{}
		}
		var names []string
		for _, st := range q.steps {
			names = append(names, st.name)
		}
		return snap{names, q.running, q.execs}
	})
	return v.steps, v.running, v.execs
}

// waitQueue waits until the work queue of id holds no step, polling: its
// steps' ends are not events a test can await.
func (h *harness) waitQueue(id string) {
	h.t.Helper()
	for range 5000 {
		if steps, _, execs := h.queueOf(id); len(steps) == 0 && execs == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	h.t.Fatalf("the work queue of %s did not empty", id)
}

// gateExecs holds every exec start in the fake runtime until the returned
// gate is closed; gateUpdates every update.
func (rt *fakeRuntime) gateExecs() chan struct{}   { return rt.gate(&rt.execGate) }
func (rt *fakeRuntime) gateUpdates() chan struct{} { return rt.gate(&rt.updateGate) }

func (rt *fakeRuntime) gate(field *chan struct{}) chan struct{} {
	gate := make(chan struct{})
	rt.mu.Lock()
	*field = gate
	rt.mu.Unlock()
	return gate
}

// waitExecsIn waits until n exec starts are in the fake runtime at once.
func (rt *fakeRuntime) waitExecsIn(t *testing.T, what string, n int) {
	t.Helper()
	rt.waitFor(t, what, func() bool {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		return rt.execsIn == n
	})
}

// TestExecStartsOfOneContainerRunTogether: the exec starts of one container
// are in the runtime at the same time (they used to queue one at a time
// on the container's work queue), and each gets its start-process.
func TestExecStartsOfOneContainerRunTogether(t *testing.T) {
	rt := newFakeRuntime()
	h := newHarness(t, rt, t.TempDir())
	h.create("a")
	h.expect("start-container a")
	gate := rt.gateExecs()
	const n = 4 // the exec lane's least size (execWorkers)
	var results []<-chan error
	for i := range n {
		results = append(results, h.execAsync(ExecRequest{ID: "a", Pid: fmt.Sprintf("e%d", i)}))
	}
	rt.waitExecsIn(t, "all exec starts in the runtime at once", n)
	close(gate)
	for i, ch := range results {
		if err := awaitErr(t, fmt.Sprintf("exec e%d", i), ch); err != nil {
			t.Fatalf("exec e%d: %v", i, err)
		}
	}
	var got []string
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ev, err := h.sub.Next(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, describe(ev))
	}
	sort.Strings(got)
	if want := "[start-process a e0 start-process a e1 start-process a e2 start-process a e3]"; fmt.Sprint(got) != want {
		t.Fatalf("events %v, want %s (in any order)", got, want)
	}
}

// TestExecStartNotBehindSerialWork: an exec start does not wait for the
// container's serial work (here a resource update held in the runtime).
func TestExecStartNotBehindSerialWork(t *testing.T) {
	rt := newFakeRuntime()
	h := newHarness(t, rt, t.TempDir())
	h.create("a")
	gate := rt.gateUpdates()
	update := make(chan error, 1)
	go func() {
		update <- h.s.Update(context.Background(), UpdateRequest{ID: "a", Resources: &specs.LinuxResources{}})
	}()
	rt.waitFor(t, "the update under way", func() bool {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		return rt.updatesIn == 1
	})
	if err := awaitErr(t, "exec beside a held update", h.execAsync(ExecRequest{ID: "a", Pid: "e1"})); err != nil {
		t.Fatalf("exec beside a held update: %v", err)
	}
	close(gate)
	if err := awaitErr(t, "update", update); err != nil {
		t.Fatal(err)
	}
}

// TestInitExitWaitsForExecStart: an init that exits while an exec of its
// container is starting has its exit published after that start ended: an
// exec that did start (its pids are the host's, or runc won the race) is
// killed, and its start and exit come before the init's exit.
func TestInitExitWaitsForExecStart(t *testing.T) {
	rt := newFakeRuntime()
	h := newHarness(t, rt, t.TempDir())
	a := h.create("a")
	h.expect("start-container a")
	gate := rt.gateExecs()
	late := h.execAsync(ExecRequest{ID: "a", Pid: "late"})
	rt.waitExecsIn(t, "the exec start under way", 1)
	h.kill(a.proc("init"), 0)
	// The init's exit waits: the next event is another container's.
	h.create("b")
	h.expect("start-container b")
	close(gate)
	if err := awaitErr(t, "the late exec", late); err != nil {
		t.Fatalf("an exec that started while its init exited: %v, want its pid (it started)", err)
	}
	p := a.proc("late")
	p.mu.Lock()
	killed := p.killed
	p.mu.Unlock()
	if !killed {
		t.Fatal("an exec that started after its init exited was not killed")
	}
	h.kill(p, 137)
	h.expect("start-process a late", "exit a late 137", "exit a init 0")
	rt.waitFor(t, "the delete after the exit", func() bool {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		return a.deleted
	})
}

// TestBarrierWaitsForExecStart: a barrier step (a checkpoint) asked for
// while an exec start is under way waits for it.
func TestBarrierWaitsForExecStart(t *testing.T) {
	rt := newFakeRuntime()
	h := newHarness(t, rt, t.TempDir())
	h.create("a")
	h.expect("start-container a")
	h.waitQueue("a") // the mark-started after the start
	gate := rt.gateExecs()
	exec := h.execAsync(ExecRequest{ID: "a", Pid: "e1"})
	rt.waitExecsIn(t, "the exec start under way", 1)
	checkpoint := make(chan error, 1)
	go func() {
		checkpoint <- h.s.CreateCheckpoint(context.Background(), "a", t.TempDir(), runtime.CheckpointOpts{})
	}()
	var steps []string
	var running bool
	var execs int
	for range 500 {
		if steps, running, execs = h.queueOf("a"); len(steps) > 0 {
			break
		}
		time.Sleep(time.Millisecond) // the call reaches the loop on its own goroutine
	}
	if fmt.Sprint(steps) != "[checkpoint]" || running || execs != 1 {
		t.Fatalf("queue of a: steps %v, head running %v, exec starts %d; want the checkpoint waiting for 1 exec start", steps, running, execs)
	}
	close(gate)
	if err := awaitErr(t, "exec", exec); err != nil {
		t.Fatal(err)
	}
	if err := awaitErr(t, "checkpoint", checkpoint); err == nil || !strings.Contains(err.Error(), "not supported by the fake") {
		t.Fatalf("checkpoint: %v, want the fake's refusal (it ran)", err)
	}
}

// TestExecAfterBarrierWaits: an exec asked for while a barrier (a pause)
// is queued behind a held resource update starts only after the pause.
func TestExecAfterBarrierWaits(t *testing.T) {
	rt := newFakeRuntime()
	h := newHarness(t, rt, t.TempDir())
	h.create("a")
	h.expect("start-container a")
	gate := rt.gateUpdates()
	update := make(chan error, 1)
	go func() {
		update <- h.s.Update(context.Background(), UpdateRequest{ID: "a", Resources: &specs.LinuxResources{}})
	}()
	pause := make(chan error, 1)
	waitSteps := func(want ...string) {
		t.Helper()
		for range 500 {
			steps, _, _ := h.queueOf("a")
			if fmt.Sprint(steps) == fmt.Sprint(want) {
				return
			}
			time.Sleep(time.Millisecond) // the calls reach the loop on their own goroutines
		}
		steps, _, _ := h.queueOf("a")
		t.Fatalf("queue of a: %v, want %v", steps, want)
	}
	waitSteps("update")
	go func() { pause <- h.s.Update(context.Background(), UpdateRequest{ID: "a", Status: StatusPaused}) }()
	waitSteps("update", "update")
	exec := h.execAsync(ExecRequest{ID: "a", Pid: "e1"})
	waitSteps("update", "update", "exec")
	close(gate)
	for _, ch := range []<-chan error{update, pause, exec} {
		if err := awaitErr(t, "call", ch); err != nil {
			t.Fatal(err)
		}
	}
	h.expect("pause a", "start-process a e1")
}
