package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/evjournal/containerd/integration/fixture"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	eventPods    = 20
	podEventCtrs = 15 // 300 containers in all
)

// TestCRIEventOrderAndBacklog: GetContainerEvents over 300 containers that
// exit as soon as they start, in 20 pods, then across two restarts of the
// daemon (a SIGKILL, then a graceful stop).
//
//   - Every container gets CREATED < STARTED < STOPPED < DELETED and every
//     pod the same, each exactly once (the old design sent STOPPED before
//     STARTED for containers that exit at once, a pod's STOPPED at every
//     StopPodSandbox and again at its removal, and nothing for a pause that
//     died).
//   - A stream opened after each restart replays the events of the last 5
//     minutes from the journal: each once, in the order the first stream
//     got them live (the old design kept one backlog in memory, lost at a
//     restart and stolen by the first stream to open).
//   - A pause killed by pid gives its pod a STOPPED and NOTREADY.
func TestCRIEventOrderAndBacklog(t *testing.T) {
	t.Parallel()
	e := newCRIEnv(t)
	node := criNode(t, e, filepath.Join(e.d.Dir, "root"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	live := openEvents(t, ctx, e)

	ref := e.pushTestinit(t, "e2e/events:1")
	if _, err := e.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	pods, ctrs := runExitingPods(t, ctx, e, ref)
	t.Logf("%d pods, %d containers made and exited in %v", len(pods), len(ctrs), time.Since(start).Round(time.Millisecond))

	// The first stream, live from the start: every pod CREATED and
	// STARTED, every container CREATED, STARTED and STOPPED.
	want := map[string][]runtimeapi.ContainerEventType{}
	for _, p := range pods {
		want[p.id] = []runtimeapi.ContainerEventType{created, started}
	}
	for _, c := range ctrs {
		want[c] = []runtimeapi.ContainerEventType{created, started, stopped}
	}
	history := live.until(t, want)
	live.cancel()

	// A crash; the stream opened after it replays the history, then hears
	// a pause killed by pid.
	e.d.Kill()
	restart(t, e.d)
	node.DaemonPid = e.d.Pid()
	history = replayThenKillPause(t, ctx, e, history, pods[0])

	// A graceful stop: the same with the next pod.
	e.d.Stop()
	restart(t, e.d)
	node.DaemonPid = e.d.Pid()
	after := openEvents(t, ctx, e)
	after.replayed(t, history)
	killPause(t, e, pods[1].id)
	history = append(history, after.until(t, map[string][]runtimeapi.ContainerEventType{pods[1].id: {stopped}})...)
	wantNotReady(t, e, pods[1].id)

	// Every pod removed at once: each container DELETED, each pod STOPPED
	// (the two whose pause died have theirs) and DELETED.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	rest := map[string][]runtimeapi.ContainerEventType{}
	for _, p := range pods {
		rest[p.id] = []runtimeapi.ContainerEventType{stopped, deleted}
		for _, c := range p.ctrs {
			rest[c] = []runtimeapi.ContainerEventType{deleted}
		}
		g.Go(func() error {
			if _, err := e.rt.StopPodSandbox(gctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.id}); err != nil {
				return err
			}
			_, err := e.rt.RemovePodSandbox(gctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.id})
			return err
		})
	}
	rest[pods[0].id], rest[pods[1].id] = rest[pods[0].id][1:], rest[pods[1].id][1:]
	if err := g.Wait(); err != nil {
		t.Fatalf("removing the pods: %v", err)
	}
	history = append(history, after.until(t, rest)...)

	// Each object's whole life, once each, in order.
	lives := map[string][]runtimeapi.ContainerEventType{}
	for _, ev := range history {
		lives[ev.ContainerId] = append(lives[ev.ContainerId], ev.ContainerEventType)
	}
	whole := []runtimeapi.ContainerEventType{created, started, stopped, deleted}
	for _, p := range pods {
		for _, id := range append([]string{p.id}, p.ctrs...) {
			if !slices.Equal(lives[id], whole) {
				t.Errorf("events of %s: %v, want %v", id, lives[id], whole)
			}
		}
	}
	if len(lives) != len(pods)+len(ctrs) {
		t.Errorf("events of %d objects, want %d", len(lives), len(pods)+len(ctrs))
	}
	if bad := fixture.WaitChecked(ctx, promptly, node.CheckEmpty); len(bad) > 0 {
		t.Fatalf("left after every pod's removal: %s", strings.Join(bad, "; "))
	}
	t.Logf("whole test: %v", time.Since(start).Round(time.Millisecond))
}

var (
	created = runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT
	started = runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT
	stopped = runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT
	deleted = runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT
)

type eventPod struct {
	id   string
	ctrs []string
}

// runExitingPods runs the pods and their containers, which exit as soon as
// they start, as many at once as the daemon's work lanes take.
func runExitingPods(t *testing.T, ctx context.Context, e *criEnv, ref string) ([]*eventPod, []string) {
	t.Helper()
	pods := make([]*eventPod, eventPods)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for i := range pods {
		g.Go(func() error {
			cfg := e.podConfig(t, fmt.Sprintf("events%d", i))
			run, err := e.rt.RunPodSandbox(gctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
			if err != nil {
				return fmt.Errorf("pod %d: %w", i, err)
			}
			pods[i] = &eventPod{id: run.PodSandboxId, ctrs: make([]string, podEventCtrs)}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(8)
	var mu sync.Mutex
	var ctrs []string
	for i, p := range pods {
		for j := range p.ctrs {
			g.Go(func() error {
				cr, err := e.rt.CreateContainer(gctx, &runtimeapi.CreateContainerRequest{PodSandboxId: p.id,
					Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: fmt.Sprintf("c%d", j)},
						Image: &runtimeapi.ImageSpec{Image: ref}, Args: []string{"exit", fmt.Sprint(j % 3)}}})
				if err != nil {
					return fmt.Errorf("pod %d container %d: %w", i, j, err)
				}
				p.ctrs[j] = cr.ContainerId
				mu.Lock()
				ctrs = append(ctrs, cr.ContainerId)
				mu.Unlock()
				if _, err := e.rt.StartContainer(gctx, &runtimeapi.StartContainerRequest{ContainerId: cr.ContainerId}); err != nil {
					return fmt.Errorf("pod %d container %d: start: %w", i, j, err)
				}
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	return pods, ctrs
}

// eventStream is a GetContainerEvents stream read by a goroutine of its own.
type eventStream struct {
	ch     chan *runtimeapi.ContainerEventResponse
	err    chan error
	cancel context.CancelFunc
}

func openEvents(t *testing.T, ctx context.Context, e *criEnv) *eventStream {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	s, err := e.rt.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := &eventStream{ch: make(chan *runtimeapi.ContainerEventResponse, 4096), err: make(chan error, 1), cancel: cancel}
	go func() {
		for {
			ev, err := s.Recv()
			if err != nil {
				out.err <- err
				return
			}
			out.ch <- ev
		}
	}()
	return out
}

// next is the stream's next event, failing the test after eventWait.
func (s *eventStream) next(t *testing.T) *runtimeapi.ContainerEventResponse {
	t.Helper()
	select {
	case ev := <-s.ch:
		return ev
	case err := <-s.err:
		t.Fatalf("event stream: %v", err)
	case <-time.After(eventWait):
		t.Fatalf("event stream: nothing within %v", eventWait)
	}
	return nil
}

// until reads events until each id in want got its events, and returns
// what it read. An event of another id, one more than wanted, or one out
// of order fails the test; so does an event without the statuses of its
// object and pod.
func (s *eventStream) until(t *testing.T, want map[string][]runtimeapi.ContainerEventType) []*runtimeapi.ContainerEventResponse {
	t.Helper()
	left := 0
	for _, w := range want {
		left += len(w)
	}
	got := map[string]int{}
	var out []*runtimeapi.ContainerEventResponse
	for left > 0 {
		ev := s.next(t)
		w, n := want[ev.ContainerId], got[ev.ContainerId]
		if n >= len(w) || w[n] != ev.ContainerEventType {
			t.Fatalf("event %v of %s after %v of it, want %v", ev.ContainerEventType, ev.ContainerId, w[:min(n, len(w))], w)
		}
		wantStatuses(t, ev)
		got[ev.ContainerId]++
		left--
		out = append(out, ev)
	}
	return out
}

// wantStatuses checks that an event carries its object's status: a
// container's own and its pod's, a pod's.
func wantStatuses(t *testing.T, ev *runtimeapi.ContainerEventResponse) {
	t.Helper()
	if ev.PodSandboxStatus == nil {
		t.Fatalf("event %v of %s without its pod's status", ev.ContainerEventType, ev.ContainerId)
	}
	if len(ev.ContainersStatuses) == 0 {
		if ev.PodSandboxStatus.Id != ev.ContainerId {
			t.Fatalf("event %v of %s: the pod's status is of %s", ev.ContainerEventType, ev.ContainerId, ev.PodSandboxStatus.Id)
		}
		return
	}
	cs := ev.ContainersStatuses[0]
	if len(ev.ContainersStatuses) != 1 || cs.Id != ev.ContainerId {
		t.Fatalf("event %v of %s: statuses %v", ev.ContainerEventType, ev.ContainerId, ev.ContainersStatuses)
	}
	if ev.ContainerEventType == stopped && cs.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Fatalf("STOPPED of %s with state %v", ev.ContainerId, cs.State)
	}
}

// replayed reads the stream's replay and checks that it is history: the
// same events in the same order, each once.
func (s *eventStream) replayed(t *testing.T, history []*runtimeapi.ContainerEventResponse) {
	t.Helper()
	for i, h := range history {
		ev := s.next(t)
		if ev.ContainerId != h.ContainerId || ev.ContainerEventType != h.ContainerEventType || ev.CreatedAt != h.CreatedAt {
			t.Fatalf("replayed event %d of %d: %v of %s at %d, want %v of %s at %d", i, len(history),
				ev.ContainerEventType, ev.ContainerId, ev.CreatedAt, h.ContainerEventType, h.ContainerId, h.CreatedAt)
		}
		wantStatuses(t, ev)
	}
}

// replayThenKillPause opens a stream after a restart, checks its replay,
// kills pod's pause by pid and awaits the pod's STOPPED.
func replayThenKillPause(t *testing.T, ctx context.Context, e *criEnv, history []*runtimeapi.ContainerEventResponse, pod *eventPod) []*runtimeapi.ContainerEventResponse {
	t.Helper()
	s := openEvents(t, ctx, e)
	defer s.cancel()
	s.replayed(t, history)
	killPause(t, e, pod.id)
	history = append(history, s.until(t, map[string][]runtimeapi.ContainerEventType{pod.id: {stopped}})...)
	wantNotReady(t, e, pod.id)
	return history
}

// killPause SIGKILLs a pod's pause process behind the daemon's back.
func killPause(t *testing.T, e *criEnv, podID string) {
	t.Helper()
	kill(t, initPid(t, e.d, podID), syscall.SIGKILL)
}

func wantNotReady(t *testing.T, e *criEnv, podID string) {
	t.Helper()
	ps, err := e.rt.PodSandboxStatus(cctx(t), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: podID})
	if err != nil || ps.Status.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Fatalf("pod %s after its pause was killed: %v %v, want NOTREADY", podID, ps.GetStatus().GetState(), err)
	}
}
