package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/evjournal/containerd/supervisor"
	"github.com/evjournal/containerd/supervisor/journal"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The service learns of exits from the supervisor's event stream, the same
// journaled events every client sees. It keeps a cursor (the journal's id
// and the last sequence number it applied) so that after a restart it
// replays exactly what it missed; applying an exit is idempotent, so a
// crash between a record's write and the cursor's costs nothing.

// cursorFile is the cursor, in Root.
const cursorFile = "events.cursor"

type cursor struct {
	Journal string `json:"journal"`
	Seq     uint64 `json:"seq"`
}

// exitInfo is a process's exit as the journal has it.
type exitInfo struct {
	status uint32
	at     time.Time
}

// load reads the records of pods and containers.
func (s *Server) load() error {
	bad := func(dir string, err error) {
		s.log.WithError(err).WithField("dir", dir).Error("cri: record unreadable; left in place and ignored")
	}
	sbs, err := loadRecords[sandboxRecord](filepath.Join(s.cfg.Root, "sandboxes"), "sandbox.json", bad)
	if err != nil {
		return fmt.Errorf("cri: load pods: %w", err)
	}
	for _, rec := range sbs {
		cfg := &runtimeapi.PodSandboxConfig{}
		if err := unmarshalProto(rec.Config, cfg); err != nil {
			bad(s.sandboxDir(rec.ID), err)
			continue
		}
		s.sandboxes[rec.ID] = &sandbox{rec: rec, cfg: cfg}
	}
	cs, err := loadRecords[containerRecord](filepath.Join(s.cfg.Root, "containers"), "container.json", bad)
	if err != nil {
		return fmt.Errorf("cri: load containers: %w", err)
	}
	for _, rec := range cs {
		cfg := &runtimeapi.ContainerConfig{}
		if err := unmarshalProto(rec.Config, cfg); err != nil {
			bad(s.containerDir(rec.ID), err)
			continue
		}
		s.containers[rec.ID] = &container{rec: rec, cfg: cfg}
	}
	return nil
}

// subscribe catches up from the saved cursor, applying what the journal
// stored since (synchronously: when Start returns, the records are current,
// so no CRI call sees an exit that happened while the daemon was down as
// still running), then follows the live events from there, with no gap.
// When the journal cannot replay from the cursor (a journal that replaced
// a lost one, or the events were compacted away), it applies everything the
// journal still holds instead (an exit the supervisor replayed at its
// restore is there with its real status), follows live from there, and
// reconciles the records with what the supervisor runs: only an exit found
// nowhere is recorded with status 255.
func (s *Server) subscribe(ctx context.Context) (*supervisor.Subscription, error) {
	var cur cursor
	if data, err := os.ReadFile(filepath.Join(s.cfg.Root, cursorFile)); err == nil {
		json.Unmarshal(data, &cur)
	}
	if cur.Seq == 0 {
		// Nothing applied yet (a first start): live events only.
		sub, err := s.sup.Subscribe(ctx, supervisor.SubscribeRequest{})
		if err != nil {
			return nil, fmt.Errorf("cri: subscribe to events: %w", err)
		}
		s.reconcile(ctx)
		return sub, nil
	}
	last, err := s.catchUp(ctx, supervisor.SubscribeRequest{AfterSeq: cur.Seq, JournalID: cur.Journal, StoredOnly: true}, cur.Seq)
	if err == nil {
		sub, err := s.sup.Subscribe(ctx, supervisor.SubscribeRequest{AfterSeq: last, JournalID: cur.Journal})
		if err == nil {
			return sub, nil
		}
	}
	s.log.WithError(err).Warn("cri: cannot replay the events since the last one applied; applying what the journal holds, then reconciling with the running containers")
	start := time.Now()
	all := supervisor.SubscribeRequest{After: time.Unix(0, 0), StoredOnly: true}
	if last, err = s.catchUp(ctx, all, 0); err != nil {
		return nil, fmt.Errorf("cri: replay the journal: %w", err)
	}
	// What the supervisor has, then what was journaled up to then: a
	// container it no longer has had its exit journaled before that (it
	// removes a container in the step that journals its exit), so the
	// second catch-up applies it and the reconcile below sees it exited.
	infos, err := s.sup.State(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("cri: reconcile: %w", err)
	}
	since := all
	if last > 0 {
		since = supervisor.SubscribeRequest{AfterSeq: last, JournalID: s.sup.JournalID(), StoredOnly: true}
	}
	if last, err = s.catchUp(ctx, since, last); err != nil {
		return nil, fmt.Errorf("cri: replay the journal: %w", err)
	}
	req := supervisor.SubscribeRequest{}
	if last > 0 {
		req = supervisor.SubscribeRequest{AfterSeq: last, JournalID: s.sup.JournalID()}
	}
	sub, err := s.sup.Subscribe(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("cri: subscribe to events: %w", err)
	}
	s.log.WithField("last_seq", last).WithField("took", time.Since(start)).Info("cri: applied what the journal holds")
	if last > 0 {
		s.saveCursor(last) // the next start replays from here, not all again
	}
	s.reconcileWith(infos)
	return sub, nil
}

// catchUp applies the stored events r selects; it returns the last seq
// seen (from when there are none).
func (s *Server) catchUp(ctx context.Context, r supervisor.SubscribeRequest, from uint64) (uint64, error) {
	sub, err := s.sup.Subscribe(ctx, r)
	if err != nil {
		return 0, err
	}
	defer sub.Close()
	last := from
	for {
		ev, err := sub.Next(ctx)
		if errors.Is(err, io.EOF) {
			return last, nil
		}
		if err != nil {
			return 0, err
		}
		last = ev.Seq
		if s.apply(ev) {
			s.saveCursor(ev.Seq)
		}
	}
}

// reconcile marks exited what the records say runs but the supervisor no
// longer has. A container the supervisor still has, even stopped, is left
// alone: its exit event is yet to come (the supervisor removes a container
// only once its exit is journaled), and the live subscription brings it
// with its real status.
func (s *Server) reconcile(ctx context.Context) {
	infos, err := s.sup.State(ctx, "")
	if err != nil {
		s.log.WithError(err).Warn("cri: reconcile: state")
		return
	}
	s.reconcileWith(infos)
}

// reconcileWith is reconcile with the supervisor's containers given.
func (s *Server) reconcileWith(infos []supervisor.ContainerInfo) {
	live := map[string]bool{}
	for _, in := range infos {
		live[in.ID] = true
	}
	now := time.Now()
	for _, c := range s.containers {
		if c.rec.State == stateRunning && !live[c.rec.ID] {
			c.rec.Reconciled = true
			s.applyContainerExit(c, exitInfo{status: 255, at: now}, "the exit is no longer in the daemon's journal")
		}
	}
	for _, sb := range s.sandboxes {
		if sb.rec.State == sandboxReady && !live[sb.rec.ID] {
			s.applySandboxExit(sb)
		}
	}
}

// follow applies events until ctx ends; a subscription cut off for lagging
// is resumed from the last applied seq.
func (s *Server) follow(ctx context.Context, sub *supervisor.Subscription) {
	defer close(s.done)
	var last, saved uint64
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			sub.Close()
			if ctx.Err() != nil || errors.Is(err, supervisor.ErrStopped) {
				return
			}
			s.log.WithError(err).Warn("cri: event stream ended; resuming")
			for {
				sub, err = s.sup.Subscribe(ctx, supervisor.SubscribeRequest{AfterSeq: last, JournalID: s.sup.JournalID()})
				if err == nil || ctx.Err() != nil {
					break
				}
				s.log.WithError(err).Error("cri: cannot resume the event stream")
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
			if ctx.Err() != nil {
				return
			}
			continue
		}
		last = ev.Seq
		if s.apply(ev) || ev.Seq-saved >= cursorEvery {
			s.saveCursor(ev.Seq)
			saved = ev.Seq
		}
	}
}

// cursorEvery: the cursor is also saved every so many events of other
// containers, so that a restart's replay stays within what the journal
// retains (--retain-count) even when CRI containers are quiet.
const cursorEvery = 64

// saveCursor replaces the cursor file (renamed into place, not fsynced: a
// cursor lost in a crash only means more to replay, or a reconcile, since
// applying is idempotent).
func (s *Server) saveCursor(seq uint64) {
	data, _ := json.Marshal(cursor{Journal: s.sup.JournalID(), Seq: seq})
	path := filepath.Join(s.cfg.Root, cursorFile)
	err := os.WriteFile(path+".tmp", data, 0o600)
	if err == nil {
		err = os.Rename(path+".tmp", path)
	}
	if err != nil {
		s.log.WithError(err).Warn("cri: save the event cursor (a restart replays more; applying is idempotent)")
	}
}

// apply takes one event into the records; it reports whether the event
// concerns a CRI object, so that the cursor moves past it (a start too:
// without it, a cursor saved before any exit would leave a restart nothing
// to replay from, and its exits would be reconciled as unknown).
func (s *Server) apply(ev journal.Event) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ev.Type {
	case journal.TypeStartContainer:
		_, isContainer := s.containers[ev.ID]
		_, isSandbox := s.sandboxes[ev.ID]
		return isContainer || isSandbox
	case journal.TypeOOM:
		if c, ok := s.containers[ev.ID]; ok && (c.rec.State == stateRunning || c.rec.State == stateCreated) {
			c.rec.OOMKilled = true
		}
		return false
	case journal.TypeExit:
		at := ev.ExitedAt
		if at.IsZero() {
			at = ev.Timestamp
		}
		info := exitInfo{status: ev.Status, at: at}
		s.notify(ev.ID+"/"+ev.Pid, info)
		if ev.Pid != "init" {
			return false
		}
		// A real exit also replaces the 255 a reconcile gave for want of
		// one: the supervisor may journal an exit it found at its restore
		// just after the service reconciled.
		if c, ok := s.containers[ev.ID]; ok && (c.rec.Incarnation == "" || c.rec.Incarnation == ev.Incarnation) &&
			(c.rec.State == stateRunning || c.rec.State == stateCreated && c.rec.StartedAt == 0 || c.rec.Reconciled) {
			c.rec.Reconciled = false
			s.applyContainerExit(c, info, "")
			return true
		}
		if sb, ok := s.sandboxes[ev.ID]; ok && sb.rec.State == sandboxReady {
			s.applySandboxExit(sb)
			return true
		}
	}
	return false
}

// applyContainerExit records an exit. Call with s.mu held.
func (s *Server) applyContainerExit(c *container, e exitInfo, message string) {
	c.rec.State, c.rec.FinishedAt, c.rec.ExitCode, c.rec.Pid = stateExited, e.at.UnixNano(), int32(e.status), 0
	switch {
	case c.rec.OOMKilled:
		c.rec.Reason = "OOMKilled"
	case e.status == 0:
		c.rec.Reason = "Completed"
	default:
		c.rec.Reason = "Error"
	}
	c.rec.Message = message
	rec := c.rec
	if err := writeRecord(s.containerDir(rec.ID), "container.json", &rec); err != nil {
		s.log.WithError(err).WithField("container", rec.ID).Error("cri: record the exit")
	}
	s.broadcastLocked(containerEvent(c, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, s.sandboxes[c.rec.SandboxID]))
}

// applySandboxExit records that a pod's pause process is gone. Call with
// s.mu held.
func (s *Server) applySandboxExit(sb *sandbox) {
	sb.rec.State, sb.rec.Pid = sandboxNotReady, 0
	rec := sb.rec
	if err := writeRecord(s.sandboxDir(rec.ID), "sandbox.json", &rec); err != nil {
		s.log.WithError(err).WithField("sandbox", rec.ID).Error("cri: record the pod's exit")
	}
}

// wait registers for the exit of process pid of container id. Register
// before acting (signal, exec), then awaitExit.
func (s *Server) wait(id, pid string) chan exitInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waitLocked(id, pid)
}

func (s *Server) waitLocked(id, pid string) chan exitInfo {
	ch := make(chan exitInfo, 1)
	key := id + "/" + pid
	s.waiters[key] = append(s.waiters[key], ch)
	return ch
}

func (s *Server) unwait(id, pid string, ch chan exitInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := id + "/" + pid
	ws := s.waiters[key]
	for i, w := range ws {
		if w == ch {
			s.waiters[key] = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(s.waiters[key]) == 0 {
		delete(s.waiters, key)
	}
}

// notify hands an exit to its waiters. Call with s.mu held.
func (s *Server) notify(key string, e exitInfo) {
	for _, ch := range s.waiters[key] {
		ch <- e
	}
	delete(s.waiters, key)
}

var errExitTimeout = errors.New("no exit event within the wait")

func awaitExit(ctx context.Context, ch chan exitInfo, timeout time.Duration) (exitInfo, error) {
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

// feedBuffer bounds the events queued for one GetContainerEvents stream; a
// stream that falls further behind is ended (kubelet relists).
const feedBuffer = 1024

func containerEvent(c *container, t runtimeapi.ContainerEventType, sb *sandbox) *runtimeapi.ContainerEventResponse {
	ev := &runtimeapi.ContainerEventResponse{ContainerId: c.rec.ID, ContainerEventType: t, CreatedAt: time.Now().UnixNano(),
		ContainersStatuses: []*runtimeapi.ContainerStatus{containerStatus(c)}}
	if sb != nil {
		ev.PodSandboxStatus = sandboxStatus(sb)
	}
	return ev
}

func (s *Server) broadcastContainer(c *container, t runtimeapi.ContainerEventType) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.broadcastLocked(containerEvent(c, t, s.sandboxes[c.rec.SandboxID]))
}

func (s *Server) broadcastSandbox(sb *sandbox, t runtimeapi.ContainerEventType) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.broadcastLocked(&runtimeapi.ContainerEventResponse{ContainerId: sb.rec.ID, ContainerEventType: t,
		CreatedAt: time.Now().UnixNano(), PodSandboxStatus: sandboxStatus(sb)})
}

// broadcastLocked queues ev on every stream; a full one is closed. With no
// stream open, ev waits in the backlog for the next one.
func (s *Server) broadcastLocked(ev *runtimeapi.ContainerEventResponse) {
	if len(s.feeds) == 0 {
		if len(s.backlog) == feedBuffer {
			s.backlog = s.backlog[1:]
		}
		s.backlog = append(s.backlog, ev)
		return
	}
	for ch := range s.feeds {
		select {
		case ch <- ev:
		default:
			close(ch)
			delete(s.feeds, ch)
		}
	}
}

// GetContainerEvents streams container and pod lifecycle events as they
// happen (CREATED, STARTED, STOPPED, DELETED). A stream opened when none
// was begins with what happened while none was open: after a restart, the
// STOPPED events of the exits that happened while the daemon was down,
// once (kubelet keeps one stream open).
func (s *Server) GetContainerEvents(_ *runtimeapi.GetEventsRequest, stream runtimeapi.RuntimeService_GetContainerEventsServer) error {
	ch := make(chan *runtimeapi.ContainerEventResponse, feedBuffer)
	s.mu.Lock()
	for _, ev := range s.backlog {
		ch <- ev
	}
	s.backlog = nil
	s.feeds[ch] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.feeds, ch) // gone already if it was cut off
		s.mu.Unlock()
	}()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return toStatus(fmt.Errorf("event stream fell %d events behind and was ended: relist: %w", feedBuffer, errUnavailable))
			}
			if err := stream.Send(ev); err != nil {
				return err
			}
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}
}
