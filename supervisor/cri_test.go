package supervisor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/supervisor/objects"
)

// The CRI objects through the loop's API, with the fake runtime: what the
// CRI service (and so kubelet) is told of a pod or container always agrees
// with its process and with the journal.

// reserve takes name for a new object.
func (h *harness) reserve(kind objects.Kind, id, sandbox, name string) {
	h.t.Helper()
	must(h.t, h.s.ReserveObject(context.Background(), ObjectSpec{Kind: kind, ID: id, SandboxID: sandbox, Name: name}))
}

// object makes a visible object: reserved, then committed.
func (h *harness) object(kind objects.Kind, id, sandbox string) {
	h.t.Helper()
	h.reserve(kind, id, sandbox, "name-"+id)
	if _, err := h.s.CommitObject(context.Background(), id); err != nil {
		h.t.Fatalf("commit %s: %v", id, err)
	}
	h.expect("cri-created " + id)
}

// startObject starts a created object and returns it as the reply says.
func (h *harness) startObject(id string) objects.Object {
	h.t.Helper()
	o, err := h.s.StartObject(context.Background(), CreateRequest{ID: id, Bundle: "/b"})
	if err != nil {
		h.t.Fatalf("start %s: %v", id, err)
	}
	h.expect("start-container " + id)
	return o
}

// get returns the loop's view of an object.
func (h *harness) get(id string) objects.Object {
	h.t.Helper()
	o, err := h.s.Object(context.Background(), id)
	if err != nil {
		h.t.Fatalf("object %s: %v", id, err)
	}
	return o
}

// live is the runtime's container id.
func (h *harness) live(id string) *fakeContainer {
	h.rt.mu.Lock()
	defer h.rt.mu.Unlock()
	return h.rt.live[id]
}

func (h *harness) init(id string) *fakeProcess { return h.live(id).proc("init") }

// enteringRuntime is the fake runtime that says when a create reached it
// (the worker runs it; the loop is free), and whose creates end when their
// context does, as runc's do.
type enteringRuntime struct {
	*fakeRuntime
	entered chan string
}

func (r *enteringRuntime) New(o runtime.ContainerOpts) (Container, error) {
	c, err := r.fakeRuntime.New(o)
	r.entered <- o.ID
	if err != nil {
		return nil, err
	}
	return cancellableCreate{c.(*fakeContainer)}, nil
}

type cancellableCreate struct{ *fakeContainer }

func (c cancellableCreate) Create(ctx context.Context, o runtime.CreateOpts) (Process, error) {
	p, err := c.fakeContainer.Create(ctx, o)
	if err == nil && ctx.Err() != nil {
		return nil, fmt.Errorf("runc create: %w", ctx.Err())
	}
	return p, err
}

// TestStartObjectOutlivesItsCaller: a start goes on when its caller gives
// up (kubelet's timeout cancels the request while runc works), and the
// object is then what its process is: starting (created) while nothing
// runs, running once it runs, exited 128 StartError with a journaled
// cri-start-failed when nothing could run; an exit later makes a running
// one exited. Never refused for the cancel, never left "starting". A
// process started for a caller that is gone is killed (SIGKILL): nobody
// was told it runs.
func TestStartObjectOutlivesItsCaller(t *testing.T) {
	injected := errors.New("runc create: exec: \"sh\": executable file not found")
	for _, tc := range []struct {
		name   string
		cancel bool  // the caller gives up while the runtime creates
		fail   error // the runtime's create fails
	}{
		{"created", false, nil},
		{"created after the caller gave up", true, nil},
		{"create failed", false, injected},
		{"create failed after the caller gave up", true, injected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := newFakeRuntime()
			er := &enteringRuntime{fakeRuntime: rt, entered: make(chan string, 1)}
			h := newHarnessWith(t, rt, t.TempDir(), func(c *Config) { c.RuntimeImpl = er })
			h.object(objects.Sandbox, "p", "")
			gate := make(chan struct{})
			rt.mu.Lock()
			rt.createGate, rt.failStart = gate, tc.fail
			rt.mu.Unlock()

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type reply struct {
				o   objects.Object
				err error
			}
			replies := make(chan reply, 1)
			go func() {
				o, err := h.s.StartObject(ctx, CreateRequest{ID: "p", Bundle: "/b"})
				replies <- reply{o, err}
			}()
			waitRecv(t, er.entered, "the create in the runtime")
			o := h.get("p")
			if o.State != objects.Created || !o.Starting || o.Pid != 0 {
				t.Fatalf("while the runtime creates: %+v, want created and starting", o)
			}
			if _, err := h.s.StartObject(context.Background(), CreateRequest{ID: "p", Bundle: "/b"}); !errdefs.IsFailedPrecondition(err) {
				t.Fatalf("a second start while the first runs: %v, want FailedPrecondition", err)
			}
			if _, err := h.s.BeginRemoveObject(context.Background(), "p"); !errdefs.IsFailedPrecondition(err) {
				t.Fatalf("a removal while it starts: %v, want FailedPrecondition", err)
			}
			if tc.cancel {
				cancel()
				if r := waitRecv(t, replies, "StartObject's return"); !errors.Is(r.err, context.Canceled) {
					t.Fatalf("StartObject after its caller gave up: %+v, want context.Canceled", r)
				}
			}
			close(gate)

			if tc.fail == nil {
				h.expect("start-container p")
				o = h.get("p")
				if o.State != objects.Running || o.Starting || o.Pid != h.init("p").pid || o.Incarnation != h.live("p").inc {
					t.Fatalf("started: %+v", o)
				}
			} else {
				ev := h.expect("cri-start-failed p")[0]
				if ev.Status != 128 || ev.CRI == nil || ev.CRI.Message != injected.Error() {
					t.Fatalf("journaled %+v, want status 128 with the runtime's error", ev)
				}
				o = h.get("p")
				if o.State != objects.Exited || o.Starting || o.ExitCode != 128 || o.Reason != "StartError" || o.Message != injected.Error() {
					t.Fatalf("after a failed create: %+v, want exited 128 StartError", o)
				}
			}
			if !tc.cancel {
				r := waitRecv(t, replies, "StartObject's return")
				if !errors.Is(r.err, tc.fail) || (tc.fail == nil) != (r.err == nil) || r.o != o {
					t.Fatalf("StartObject replied %+v, want %+v and error %v", r, o, tc.fail)
				}
			}
			if tc.fail == nil {
				init := h.init("p")
				init.mu.Lock()
				killed := init.kills > 0
				init.mu.Unlock()
				if killed != tc.cancel {
					t.Fatalf("the init was SIGKILLed: %v; want %v (its start's caller gave up: %v)", killed, tc.cancel, tc.cancel)
				}
				h.kill(h.init("p"), 0)
				h.expect("exit p init 0")
				if o = h.get("p"); o.State != objects.Exited || o.ExitCode != 0 || o.Reason != "Completed" || o.Pid != 0 {
					t.Fatalf("after its exit: %+v", o)
				}
			}
			if _, err := h.s.StartObject(context.Background(), CreateRequest{ID: "p", Bundle: "/b"}); !errdefs.IsFailedPrecondition(err) {
				t.Fatalf("a start of what ran: %v, want FailedPrecondition", err)
			}
		})
	}
}

// waitRecv receives from ch, bounded.
func waitRecv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: not within 5s", what)
		var zero T
		return zero
	}
}

// TestReserveObjectRace: of requests racing for one name, exactly one gets
// it; every other is told AlreadyExists naming the winner, and reserves
// nothing.
func TestReserveObjectRace(t *testing.T) {
	h := newHarness(t, newFakeRuntime(), t.TempDir())
	const n = 16
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = h.s.ReserveObject(context.Background(), ObjectSpec{Kind: objects.Sandbox, ID: fmt.Sprintf("p%d", i), Name: "pod"})
		}()
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		if err == nil {
			if winner >= 0 {
				t.Fatalf("p%d and p%d both reserved the name", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no request got the name")
	}
	holder := fmt.Sprintf("p%d", winner)
	for i, err := range errs {
		var taken *objects.NameTakenError
		if i != winner && (!errdefs.IsAlreadyExists(err) || !errors.As(err, &taken) || taken.Holder != holder) {
			t.Fatalf("p%d: %v, want AlreadyExists naming %s", i, err, holder)
		}
	}
	for i := range n {
		if i != winner { // a loser's id was not taken
			h.reserve(objects.Sandbox, fmt.Sprintf("p%d", i), "", fmt.Sprintf("pod-%d", i))
		}
	}
	must(t, h.s.ReleaseObject(context.Background(), holder))
	h.reserve(objects.Sandbox, "q", "", "pod") // released: the name is free
}

// TestObjectExitVisibleAtOnce: the exit of an object's init is in the
// loop's view when its event is published and when WatchExit delivers it
// (no later "it still runs"); a watch of what exited already (or never
// ran) delivers at once, and a watch of an exec gets the exec's exit.
func TestObjectExitVisibleAtOnce(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, newFakeRuntime(), t.TempDir())
	h.object(objects.Sandbox, "p", "")
	h.startObject("p")
	initExit, stopInit, err := h.s.WatchExit(ctx, "p", "init")
	must(t, err)
	defer stopInit()
	c := h.live("p")
	e1 := h.exec(c, "e1")
	h.expect("start-process p e1")
	execExit, stopExec, err := h.s.WatchExit(ctx, "p", "e1")
	must(t, err)
	defer stopExec()
	select {
	case x := <-initExit:
		t.Fatalf("an exit delivered while p runs: %+v", x)
	default:
	}

	h.kill(e1, 2)
	h.expect("exit p e1 2")
	if x := waitRecv(t, execExit, "the exec's exit"); x.Status != 2 {
		t.Fatalf("exec exit %+v, want 2", x)
	}
	if o := h.get("p"); o.State != objects.Running {
		t.Fatalf("an exec's exit changed the pod: %+v", o)
	}

	h.kill(h.init("p"), 3)
	h.expect("exit p init 3") // published: the view says so
	if o := h.get("p"); o.State != objects.Exited || o.ExitCode != 3 || o.Reason != "Error" || o.FinishedAt == 0 {
		t.Fatalf("after the published exit: %+v", o)
	}
	if x := waitRecv(t, initExit, "the init's exit"); x.Status != 3 {
		t.Fatalf("init exit %+v, want 3", x)
	}

	h.object(objects.Sandbox, "q", "")
	h.rt.mu.Lock()
	h.rt.failStart = errors.New("runc create failed")
	h.rt.mu.Unlock()
	if _, err := h.s.StartObject(ctx, CreateRequest{ID: "q", Bundle: "/b"}); err == nil {
		t.Fatal("the start of q did not fail")
	}
	h.expect("cri-start-failed q")
	for _, tc := range []struct {
		name, id string
		status   uint32
	}{
		{"exited", "p", 3},
		{"start failed", "q", 128},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, stop, err := h.s.WatchExit(ctx, tc.id, "init")
			must(t, err)
			defer stop()
			select {
			case x := <-ch:
				if x.Status != tc.status || x.At.IsZero() {
					t.Fatalf("got %+v, want status %d with its time", x, tc.status)
				}
			default:
				t.Fatal("the exit of what exited already was not delivered at once")
			}
		})
	}
}
