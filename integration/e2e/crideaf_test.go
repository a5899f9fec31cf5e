package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/integration/fixture"
)

// burstEvents is the burst of journal events of TestCRIHearsThroughABurst.
const burstEvents = 10_000

// TestCRIHearsThroughABurst: a burst of 10,000 journal events with
// --retain-count 100 cannot make the CRI deaf. After it, a container killed
// by pid behind the daemon's back shows EXITED 137 promptly (awaited on an
// event stream, not slept for), a StopContainer of another container
// succeeds, ExecSync works, and a GetContainerEvents stream opened before
// the burst either kept up (every CRI event of the run, in order) or was
// ended with Unavailable: never silently thinned.
//
// Why the old design failed it: the CRI learned of exits only from its
// follower, an ordinary subscriber of the journal with the daemon's
// --subscriber-buffer. Once it fell that far behind (its record writes
// under a burst of pod churn, a held queue released at once) it was cut
// off, and it resumed with AfterSeq = its last seq; with more than
// --retain-count events gone by, the journal refused that resume, and the
// follower retried the same refused request every second for ever. From
// then on no exit reached the CRI: the killed container stayed RUNNING (the
// await below times out), StopContainer waited 30 s for an exit and failed,
// ExecSync (waiting for its exec's exit event) timed out. Whether the old
// follower stalled during a given burst was luck; the test shows in every
// run what a stall then costs, with a stand-in: an ordinary 0.2 subscriber
// that stops reading during the burst is cut off, and its resume from its
// last seq is refused, exactly the request the old follower retried for
// ever. Today the CRI follows no subscription: exits reach its objects in
// the loop step that journals them.
func TestCRIHearsThroughABurst(t *testing.T) {
	t.Parallel()
	e := prepareCRIEnv(t, func(*criEnv) []string { return []string{"--retain-count", "100"} })
	e.d.Runtime = noopPauseRuntime(t, e.d.Runtime)
	e.start(t)
	node := criNode(t, e, filepath.Join(e.d.Dir, "root"))
	// One context for the whole test: its streams outlive rpcTimeout.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run, dies, lives := e.runDiesAndLives(t, "deaf")
	image := wantState(t, e, lives, runtimeapi.ContainerState_CONTAINER_RUNNING).Image

	// The burst's source: 0.2 containers paused and resumed (a runtime
	// whose pause and resume do nothing: runc's would make the burst last a
	// minute on two cores; the events are what matters).
	var burstIDs []string
	for i := range 12 {
		id := fmt.Sprintf("%s-%d", fixture.UniqueID(t), i)
		create(t, e.d, id, fixture.NewBundle(t, fixture.Args("sleep", "forever")))
		burstIDs = append(burstIDs, id)
	}
	defer killAll02(t, e.d, burstIDs) // on failure

	// Opened before the burst: the CRI stream, read only after it (its
	// first event, replayed, says it is registered), and the follower's
	// stand-in, with a fixed 64 KiB flow-control window that it never
	// reads during the burst.
	pre, err := e.rt.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var preEvents []*runtimeapi.ContainerEventResponse
	first, err := pre.Recv()
	if err != nil {
		t.Fatalf("the stream opened before the burst: %v", err)
	}
	preEvents = append(preEvents, first)
	stalled := stalledSubscriber(t, e.d)
	seqBefore := lastSeq(t, e.d)

	// The burst, with CRI containers made, run and removed during it: the
	// stream must carry their events too, in order.
	start := time.Now()
	var wg sync.WaitGroup
	var n atomic.Int64
	tenth := make(chan int, 10) // a tenth of the burst is done: churn one
	for _, id := range burstIDs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for st := "paused"; ; {
				i := n.Add(1)
				if i > burstEvents {
					return
				}
				if i%(burstEvents/10) == 0 {
					tenth <- int(i / (burstEvents / 10))
				}
				if _, err := e.d.Client.UpdateContainer(ctx, &types.UpdateContainerRequest{Id: id, Status: st}); err != nil {
					t.Errorf("burst: %s %s: %v", st, id, err)
					return
				}
				st = map[string]string{"paused": "running", "running": "paused"}[st]
			}
		}()
	}
	churned := make(chan []string, 1)
	go func() {
		var ids []string
		defer func() { churned <- ids }()
		for i := range tenth {
			id, err := churnOne(ctx, e, run.PodSandboxId, image, fmt.Sprintf("churn%d", i))
			if err != nil {
				t.Errorf("container churned during the burst: %v", err)
				return
			}
			ids = append(ids, id)
		}
	}()
	wg.Wait()
	close(tenth)
	churnIDs := <-churned
	took := time.Since(start)
	if t.Failed() {
		t.FailNow()
	}
	seqAfter := lastSeq(t, e.d)
	t.Logf("burst: %d journal events in %v (%.0f/s), %d CRI containers churned meanwhile", seqAfter-seqBefore, took.Round(time.Millisecond),
		float64(seqAfter-seqBefore)/took.Seconds(), len(churnIDs))
	if seqAfter-seqBefore < burstEvents {
		t.Fatalf("the burst journaled %d events, want at least %d", seqAfter-seqBefore, burstEvents)
	}
	stalled.wantCutOffAndRefused(t, e.d)
	killAll02(t, e.d, burstIDs)
	if bad := fixture.WaitChecked(ctx, promptly, node.Check); len(bad) > 0 {
		t.Fatalf("after the burst: %s", strings.Join(bad, "; "))
	}

	// A container killed behind the daemon's back: its exit reaches the
	// CRI at once. Awaited on a stream opened now (its replay is of the
	// last 100 events: the burst's, none of them a CRI event).
	post, err := e.rt.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	pid := initPid(t, e.d, dies)
	killed := time.Now()
	kill(t, pid, syscall.SIGKILL)
	for {
		ev := recvWithin(t, post, promptly, "the STOPPED event of the container killed after the burst")
		if ev.ContainerId == dies && ev.ContainerEventType == runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT {
			break
		}
	}
	cs := wantState(t, e, dies, runtimeapi.ContainerState_CONTAINER_EXITED)
	if cs.ExitCode != 137 {
		t.Fatalf("the container killed after the burst: exit %d, want 137", cs.ExitCode)
	}
	t.Logf("kill to STOPPED and EXITED: %v", time.Since(killed).Round(time.Millisecond))

	ex, err := e.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: lives, Cmd: []string{"/testinit", "echo", "heard"}, Timeout: 10})
	if err != nil || string(ex.Stdout) != "heard\n" || ex.ExitCode != 0 {
		t.Fatalf("ExecSync after the burst: %q %d %v", ex.GetStdout(), ex.GetExitCode(), err)
	}
	stopStart := time.Now()
	if _, err := e.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: lives, Timeout: 10}); err != nil {
		t.Fatalf("StopContainer after the burst: %v", err)
	}
	if cs := wantState(t, e, lives, runtimeapi.ContainerState_CONTAINER_EXITED); cs.ExitCode != 143 || time.Since(stopStart) > 9*time.Second {
		t.Fatalf("StopContainer after the burst: exit %d after %v, want 143 (SIGTERM) before the 10 s timeout", cs.ExitCode, time.Since(stopStart))
	}

	// The stream opened before the burst: everything, in order, or an
	// Unavailable end after an in-order prefix.
	want := map[string][]runtimeapi.ContainerEventType{
		run.PodSandboxId: {created, started},
		dies:             {created, started, stopped},
		lives:            {created, started, stopped},
	}
	for _, id := range churnIDs {
		want[id] = []runtimeapi.ContainerEventType{created, started, stopped, deleted}
	}
	preEvents, streamErr := recvUntil(pre, preEvents, func(ev *runtimeapi.ContainerEventResponse) bool {
		return ev.ContainerId == lives && ev.ContainerEventType == stopped
	})
	switch {
	case streamErr == nil:
		t.Logf("the stream opened before the burst kept up: %d events", len(preEvents))
	case status.Code(streamErr) == codes.Unavailable:
		t.Logf("the stream opened before the burst was ended after %d events: %v", len(preEvents), streamErr)
	default:
		t.Fatalf("the stream opened before the burst ended with %v after %d events, want Unavailable or no end", streamErr, len(preEvents))
	}
	got := map[string][]runtimeapi.ContainerEventType{}
	for _, ev := range preEvents {
		got[ev.ContainerId] = append(got[ev.ContainerId], ev.ContainerEventType)
	}
	for id, w := range want {
		g := got[id]
		if streamErr == nil && !slices.Equal(g, w) || streamErr != nil && !slices.Equal(g, w[:min(len(g), len(w))]) {
			t.Errorf("events of %s on the stream opened before the burst: %v, want %v", id, g, w)
		}
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			t.Errorf("events of %s, not a CRI object of this test: %v", id, got[id])
		}
	}
	removePod(t, e, run.PodSandboxId)
	if bad := fixture.WaitChecked(ctx, promptly, node.CheckEmpty); len(bad) > 0 {
		t.Fatalf("left after the pod's removal: %s", strings.Join(bad, "; "))
	}
}

// noopPauseRuntime wraps runc (the daemon's, "" for the tests' own) so that
// pause and resume do nothing: a cheap source of journaled events (pause,
// resume) through the 0.2 API.
func noopPauseRuntime(t *testing.T, runc string) string {
	t.Helper()
	if runc == "" {
		runc = fixture.Runc(t)
	}
	path := filepath.Join(t.TempDir(), "runc-noop-pause")
	script := fmt.Sprintf("#!/bin/sh\nfor a; do case $a in pause|resume) exit 0;; esac; done\nexec %s \"$@\"\n", runc)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// churnOne creates, starts, stops and removes one container in the pod.
func churnOne(ctx context.Context, e *criEnv, podID string, image *runtimeapi.ImageSpec, name string) (string, error) {
	cr, err := e.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: podID,
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: image}})
	if err != nil {
		return "", fmt.Errorf("create %s: %w", name, err)
	}
	if _, err := e.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cr.ContainerId}); err != nil {
		return "", fmt.Errorf("start %s: %w", name, err)
	}
	if _, err := e.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: cr.ContainerId, Timeout: 10}); err != nil {
		return "", fmt.Errorf("stop %s: %w", name, err)
	}
	if _, err := e.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: cr.ContainerId}); err != nil {
		return "", fmt.Errorf("remove %s: %w", name, err)
	}
	return cr.ContainerId, nil
}

// lastSeq is the seq of the newest journaled event (a stored replay serves
// the last --retain-count).
func lastSeq(t *testing.T, d *fixture.Daemon) uint64 {
	t.Helper()
	evs := stored(t, d, &types.EventsRequest{Timestamp: timestamppb.New(time.Unix(1, 0))})
	if len(evs) == 0 {
		t.Fatal("the journal serves no event")
	}
	return evs[len(evs)-1].Seq
}

// stalledSub is a live 0.2 subscription that does not read: the old CRI
// follower when it fell behind.
type stalledSub struct {
	stream types.API_EventsClient
	conn   *grpc.ClientConn
}

// stalledSubscriber subscribes on a connection of its own whose 64 KiB
// flow-control window never grows (no BDP estimation), so that the daemon's
// sends to it block once a few hundred events are unread and its
// --subscriber-buffer then fills.
func stalledSubscriber(t *testing.T, d *fixture.Daemon) *stalledSub {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+d.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := types.NewAPIClient(conn).Events(ctx, &types.EventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Header(); err != nil { // registered
		t.Fatal(err)
	}
	return &stalledSub{stream: stream, conn: conn}
}

// wantCutOffAndRefused reads what the stalled subscription was given: it
// must end cut off for lag, naming its resume point, and resuming from
// there must be refused (those events are no longer retained).
func (s *stalledSub) wantCutOffAndRefused(t *testing.T, d *fixture.Daemon) {
	t.Helper()
	var last *types.Event
	n := 0
	for {
		ev, err := s.stream.Recv()
		if err == nil {
			last, n = ev, n+1
			continue
		}
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "resume after seq") {
			t.Fatalf("the stalled subscriber, after %d events: %v, want it cut off for lag", n, err)
		}
		break
	}
	if last == nil {
		t.Fatal("the stalled subscriber got no event before it was cut off")
	}
	stream, err := d.Client.Events(ctxT(t), &types.EventsRequest{AfterSeq: last.Seq, JournalId: last.JournalId})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "no longer retained") {
		t.Fatalf("resuming after seq %d (the stalled subscriber's last): %v, want FailedPrecondition: no longer retained", last.Seq, err)
	}
	t.Logf("the stalled subscriber was cut off after %d events (seq %d); its resume is refused: %v", n, last.Seq, status.Convert(err).Message())
}

// recvWithin returns the stream's next event, failing the test after limit.
func recvWithin(t *testing.T, s runtimeapi.RuntimeService_GetContainerEventsClient, limit time.Duration, what string) *runtimeapi.ContainerEventResponse {
	t.Helper()
	type res struct {
		ev  *runtimeapi.ContainerEventResponse
		err error
	}
	ch := make(chan res, 1)
	go func() { ev, err := s.Recv(); ch <- res{ev, err} }()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("%s: %v", what, r.err)
		}
		return r.ev
	case <-time.After(limit):
		t.Fatalf("%s: nothing within %v", what, limit)
		return nil
	}
}

// recvUntil appends the stream's events to evs until done says the last
// one is the last wanted, or the stream ends (its error).
func recvUntil(s runtimeapi.RuntimeService_GetContainerEventsClient, evs []*runtimeapi.ContainerEventResponse,
	done func(*runtimeapi.ContainerEventResponse) bool) ([]*runtimeapi.ContainerEventResponse, error) {
	for _, ev := range evs {
		if done(ev) {
			return evs, nil
		}
	}
	for {
		ev, err := s.Recv()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
		if done(ev) {
			return evs, nil
		}
	}
}

// killAll02 SIGKILLs the 0.2 containers ids through the daemon and waits
// for their exits.
func killAll02(t *testing.T, d *fixture.Daemon, ids []string) {
	t.Helper()
	if !d.Running() {
		return
	}
	evs := d.SubscribeAfter(time.Now(), "")
	defer evs.Close()
	left := map[string]bool{}
	for _, id := range ids {
		if _, err := d.Client.Signal(ctxT(t), &types.SignalRequest{Id: id, Pid: "init", Signal: uint32(unix.SIGKILL)}); err != nil {
			if status.Code(err) != codes.NotFound {
				t.Errorf("kill %s: %v", id, err)
			}
			continue
		}
		left[id] = true
	}
	for len(left) > 0 {
		ev := evs.Next(eventWait)
		if ev.Type == "exit" && ev.Pid == "init" {
			delete(left, ev.Id)
		}
	}
}
