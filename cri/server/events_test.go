package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/evjournal/containerd/supervisor/journal"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	evCreated = runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT
	evStarted = runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT
	evStopped = runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT
	evDeleted = runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT
)

// TestCRIEventOfJournalEvent: the journal's events map one to one to CRI
// events; the others, and those of ids that are no CRI object, to none.
// A container's event carries its status and its pod's, a pod's its own.
func TestCRIEventOfJournalEvent(t *testing.T) {
	e := newEnv(t)
	pod := e.runPod("web")
	c := created(e, pod)
	tests := []struct {
		name string
		ev   journal.Event
		want runtimeapi.ContainerEventType // -1: no event
	}{
		{"container created", journal.Event{Type: journal.TypeCRICreated, ID: c, CRI: &journal.CRIObject{Kind: "container"}}, evCreated},
		{"cri-created of an older daemon", journal.Event{Type: journal.TypeCRICreated, ID: c}, -1},
		{"container started", journal.Event{Type: journal.TypeStartContainer, ID: c}, evStarted},
		{"container's init exited", journal.Event{Type: journal.TypeExit, ID: c, Pid: "init", Status: 137}, evStopped},
		{"container's start failed", journal.Event{Type: journal.TypeCRIStartFailed, ID: c, Status: 128}, evStopped},
		{"an exec exited", journal.Event{Type: journal.TypeExit, ID: c, Pid: "probe"}, -1},
		{"an exec started", journal.Event{Type: journal.TypeStartProcess, ID: c, Pid: "probe"}, -1},
		{"an OOM", journal.Event{Type: journal.TypeOOM, ID: c}, -1},
		{"container deleted", journal.Event{Type: journal.TypeCRIDeleted, ID: c}, evDeleted},
		{"pod created", journal.Event{Type: journal.TypeCRICreated, ID: pod, CRI: &journal.CRIObject{Kind: "sandbox"}}, evCreated},
		{"pause exited", journal.Event{Type: journal.TypeExit, ID: pod, Pid: "init", Status: 2}, evStopped},
		{"a 0.2 container's exit", journal.Event{Type: journal.TypeExit, ID: "plain", Pid: "init"}, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.ev.Timestamp = time.Unix(100, 5)
			got := e.srv.criEvent(context.Background(), tc.ev)
			if tc.want == -1 {
				if got != nil {
					t.Fatalf("%v, want no CRI event", got)
				}
				return
			}
			if got == nil || got.ContainerEventType != tc.want || got.ContainerId != tc.ev.ID || got.CreatedAt != tc.ev.Timestamp.UnixNano() {
				t.Fatalf("%v, want %v of %s at %d", got, tc.want, tc.ev.ID, tc.ev.Timestamp.UnixNano())
			}
			if got.PodSandboxStatus.GetId() != pod {
				t.Fatalf("pod status of %q, want %s", got.PodSandboxStatus.GetId(), pod)
			}
			wantCtrs := 0
			if tc.ev.ID == c {
				wantCtrs = 1
			}
			if len(got.ContainersStatuses) != wantCtrs || wantCtrs == 1 && got.ContainersStatuses[0].Id != c {
				t.Fatalf("container statuses %v, want %d of %s", got.ContainersStatuses, wantCtrs, c)
			}
		})
	}
}

// eventsStream is GetContainerEvents' server stream, to a channel.
type eventsStream struct {
	grpc.ServerStream
	ctx  context.Context
	sent chan *runtimeapi.ContainerEventResponse
}

func (s *eventsStream) Context() context.Context { return s.ctx }

func (s *eventsStream) Send(r *runtimeapi.ContainerEventResponse) error {
	select {
	case s.sent <- r:
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

// openEvents opens a GetContainerEvents stream; its end is sent on ended.
func (e *env) openEvents() (s *eventsStream, ended <-chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	s = &eventsStream{ctx: ctx, sent: make(chan *runtimeapi.ContainerEventResponse)}
	end, done := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(done)
		end <- e.srv.GetContainerEvents(&runtimeapi.GetEventsRequest{}, s)
	}()
	e.t.Cleanup(func() {
		cancel()
		<-done
	})
	return s, end
}

// next is the stream's next event.
func (s *eventsStream) next(t *testing.T) *runtimeapi.ContainerEventResponse {
	t.Helper()
	select {
	case r := <-s.sent:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10 s")
		return nil
	}
}

// expect reads the next events and checks their ids and types.
func (s *eventsStream) expect(t *testing.T, want ...string) []*runtimeapi.ContainerEventResponse {
	t.Helper()
	var got []*runtimeapi.ContainerEventResponse
	for _, w := range want {
		r := s.next(t)
		if g := fmt.Sprintf("%s %v", r.ContainerId, r.ContainerEventType); g != w {
			t.Fatalf("event %q, want %q", g, w)
		}
		got = append(got, r)
	}
	return got
}

func ev(id string, typ runtimeapi.ContainerEventType) string { return fmt.Sprintf("%s %v", id, typ) }

// TestContainerEventsStream: through a pod's and a container's whole life,
// the stream sends each object CREATED < STARTED < STOPPED < DELETED, each
// once, in the loop's order; a STOPPED container's status is its exit.
// The pod made last shows nothing came in between or twice.
func TestContainerEventsStream(t *testing.T) {
	e := newEnv(t)
	s, _ := e.openEvents()
	ctx := context.Background()
	pod := e.runPod("web")
	s.expect(t, ev(pod, evCreated), ev(pod, evStarted))
	c := e.runCtr(pod, "app")
	s.expect(t, ev(c, evCreated), ev(c, evStarted))
	if _, err := e.srv.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c}); err != nil {
		t.Fatal(err)
	}
	stopped := s.expect(t, ev(c, evStopped))[0]
	if st := stopped.ContainersStatuses[0]; st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 137 {
		t.Fatalf("STOPPED carries %v %d, want EXITED 137", st.State, st.ExitCode)
	}
	if err := e.removePod(pod); err != nil {
		t.Fatal(err)
	}
	got := s.expect(t, ev(c, evDeleted), ev(pod, evStopped), ev(pod, evDeleted))
	if st := got[1].PodSandboxStatus.State; st != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Fatalf("the pod's STOPPED carries %v, want NOTREADY", st)
	}
	last := e.runPod("last")
	s.expect(t, ev(last, evCreated), ev(last, evStarted))
}

// TestContainerEventsBacklog: a new stream replays the events of the last
// five minutes (a kubelet that reconnects misses nothing recent), none
// older, then follows.
func TestContainerEventsBacklog(t *testing.T) {
	e := newEnv(t)
	e.j.setSkew(-2 * eventBacklogAge)
	old := e.runPod("old")
	e.j.setSkew(0)
	recent := e.runPod("recent")
	s, _ := e.openEvents()
	s.expect(t, ev(recent, evCreated), ev(recent, evStarted))
	if _, err := e.srv.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: old}); err != nil {
		t.Fatal(err)
	}
	s.expect(t, ev(old, evStopped))
}

// TestContainerEventsLag: a stream that falls behind is ended with
// Unavailable (the client relists), never thinned.
func TestContainerEventsLag(t *testing.T) {
	e := newEnv(t)
	s, ended := e.openEvents()
	pod := e.runPod("web")
	s.expect(t, ev(pod, evCreated), ev(pod, evStarted))
	e.j.lag()
	select {
	case err := <-ended:
		wantCode(t, err, codes.Unavailable, "relist")
	case r := <-s.sent:
		t.Fatalf("the lagging stream sent %v", r)
	case <-time.After(10 * time.Second):
		t.Fatal("the lagging stream did not end")
	}
}
