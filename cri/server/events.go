package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/supervisor"
	"github.com/evjournal/containerd/supervisor/journal"
	"github.com/evjournal/containerd/supervisor/objects"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// GetContainerEvents serves the CRI's lifecycle events from the journal,
// where the loop wrote them before anyone saw them: each stream replays the
// events of the last eventBacklogAge (so a kubelet that reconnects, after a
// daemon restart too, misses nothing recent), then follows live ones.
//
// The journal's events map to CRI events one to one, in journal order:
//
//	cri-created                         CREATED (a container or a pod)
//	start-container of a CRI object     STARTED
//	exit of its init, cri-start-failed  STOPPED
//	cri-deleted                         DELETED
//
// so each object gets each of them at most once, in that order. A stream
// that falls behind is ended with Unavailable (relist), never thinned.
// Statuses are the objects' as they are when the event is sent.

// eventBacklogAge bounds the events replayed to a new stream, as
// containerd's CRI plugin bounds its events queue.
const eventBacklogAge = 5 * time.Minute

func (s *Server) GetContainerEvents(_ *runtimeapi.GetEventsRequest, stream runtimeapi.RuntimeService_GetContainerEventsServer) error {
	ctx := stream.Context()
	sub, err := s.events.Events(ctx, time.Now().Add(-eventBacklogAge))
	if err != nil {
		return toStatus(fmt.Errorf("events: %w", err))
	}
	defer sub.Close()
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			return s.streamEnd(ctx, err)
		}
		resp := s.criEvent(ctx, ev)
		if resp == nil {
			continue
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

// streamEnd is the status a stream ends with.
func (s *Server) streamEnd(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var lag *supervisor.LagError
	if errors.As(err, &lag) {
		return toStatus(fmt.Errorf("event stream fell behind (last seq %d) and was ended: relist: %w", lag.LastSeq, errdefs.ErrUnavailable))
	}
	return toStatus(fmt.Errorf("event stream ended: %w", err))
}

// criEvent is the CRI event of a journal event, nil if it is none.
func (s *Server) criEvent(ctx context.Context, ev journal.Event) *runtimeapi.ContainerEventResponse {
	var t runtimeapi.ContainerEventType
	switch {
	case ev.Type == journal.TypeCRICreated && ev.CRI != nil:
		t = runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT
	case ev.Type == journal.TypeStartContainer:
		t = runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT
	case ev.Type == journal.TypeExit && ev.Pid == "init", ev.Type == journal.TypeCRIStartFailed:
		t = runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT
	case ev.Type == journal.TypeCRIDeleted:
		t = runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT
	default:
		return nil
	}
	sb, c := s.recs.lookup(ev.ID)
	if sb == nil && c == nil {
		return nil // not a CRI object, or removed before this daemon started
	}
	resp := &runtimeapi.ContainerEventResponse{ContainerId: ev.ID, ContainerEventType: t, CreatedAt: ev.Timestamp.UnixNano()}
	if c != nil {
		o, _ := s.objectOf(ctx, c.rec.ID)
		o = eventObject(o, ev)
		resp.ContainersStatuses = []*runtimeapi.ContainerStatus{containerStatus(c, o)}
		sb = s.recs.sandboxOf(c)
	}
	if sb != nil {
		o, _ := s.objectOf(ctx, sb.rec.ID)
		if c == nil {
			o = eventObject(o, ev)
		}
		resp.PodSandboxStatus = sandboxStatus(sb, o)
	}
	return resp
}

// eventObject is the object to describe in an event: the loop's, or for
// one removed since, what the event itself says.
func eventObject(o objects.Object, ev journal.Event) objects.Object {
	if o.ID != "" {
		return o
	}
	o.ID, o.State = ev.ID, objects.Exited
	return o
}

// exitInfo is a process's exit as the loop reports it.
type exitInfo = supervisor.ExitStatus

var errExitTimeout = errors.New("no exit event within the wait")

func awaitExit(ctx context.Context, ch <-chan supervisor.ExitStatus, timeout time.Duration) (exitInfo, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case e := <-ch:
		return e, nil
	case <-t.C:
		return exitInfo{}, fmt.Errorf("%w (%v)", errExitTimeout, timeout)
	case <-ctx.Done():
		return exitInfo{}, ctx.Err()
	}
}
