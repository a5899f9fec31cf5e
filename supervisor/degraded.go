package supervisor

import (
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/supervisor/journal"
)

// pending is one thing waiting for the journal: an event to publish once it
// is durable, or a follow-up (a reply, a marker written on a worker) that
// must not run before the events emitted ahead of it are durable.
type pending struct {
	ev     *journal.Event // the event, stamped by the journal once appended
	then   func()         // a follow-up, run in order once everything before it is journaled
	refuse func(error)    // for a reply: called at once, instead of then, if the events before it are held
}

// Held events: while the journal cannot write (ENOSPC, EDQUOT, EIO, EROFS...)
// the daemon is degraded. Nothing is published that is not journaled: the
// events that happen meanwhile (exits and OOMs; the events of requests that
// were already under way) wait in order in s.held, with every follow-up
// behind them, and are appended again with a backoff until the journal takes
// them. Requests that would create events are refused (refuseIfDegraded);
// reads, State, signals and replay keep working. The held queue is bounded by
// the processes the daemon knows, since none can start while it is degraded,
// and by maxHeldEvents: past it the loop stops taking exits and OOMs from
// the monitor (their sources stay readable, the shims' statuses on disk)
// until the journal writes again.
const (
	minHeldRetry  = 100 * time.Millisecond
	maxHeldRetry  = 5 * time.Second
	maxHeldEvents = 4096
)

// heldFull reports whether the held queue is at its bound.
func (s *Supervisor) heldFull() bool { return s.heldEvents >= maxHeldEvents }

// JournalError is why the daemon is degraded: the journal could not make an
// event durable. It names the journal and the errno, and is classified as
// unavailable: the request changed nothing and may be retried.
type JournalError struct {
	Dir string
	Err error // the journal's error (a *journal.WriteError, usually)
}

func (e *JournalError) Error() string {
	what := e.Err.Error()
	var we *journal.WriteError
	if errors.As(e.Err, &we) {
		what = fmt.Sprintf("%s %s: %v", we.Op, filepath.Base(we.File), errnoText(we.Err))
	}
	return fmt.Sprintf("containerd: the event journal in %s cannot write (%s: %s): requests that create events are refused until it can",
		e.Dir, errnoName(e.Err), what)
}

// errnoText is the OS's text for the errno inside err, or err's own text.
func errnoText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return err.Error()
}

// Unwrap gives the class first (unavailable: a retry may succeed), so that
// errdefs.Resolve finds it, then the journal's error (errors.Is(err,
// syscall.ENOSPC) holds).
func (e *JournalError) Unwrap() []error { return []error{errdefs.ErrUnavailable, e.Err} }

// errnoName returns the symbolic errno inside err ("ENOSPC"), or "error"
// when it carries none.
func errnoName(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if name := unix.ErrnoName(errno); name != "" {
			return name
		}
		return fmt.Sprintf("errno %d", int(errno))
	}
	return "error"
}

// refuseIfDegraded returns the error for a request that would create an
// event while the journal cannot write, or nil. Called on the loop.
func (s *Supervisor) refuseIfDegraded() error {
	if s.degraded == nil {
		return nil
	}
	return s.degraded
}

// degrade is called when an append or a commit failed: everything of the
// current batch goes back in order to the held queue (the journal has
// discarded what it had of it), and the retries start.
func (s *Supervisor) degrade(err error) {
	s.m.journalErrors.Inc(1)
	first := s.degraded == nil
	s.degraded = &JournalError{Dir: s.journalDir, Err: err}
	// Before the batch's replies are refused: a client told "journal full"
	// must find the daemon degraded in the metrics too.
	s.m.degraded.Update(1)
	out := s.outbox
	s.outbox = nil
	for _, it := range out {
		s.hold(it)
	}
	if first {
		s.log.WithError(err).WithField("errno", errnoName(err)).WithField("held", s.heldEvents).
			Error("journal cannot write: daemon degraded; events are held in memory and retried, requests that create events are refused")
		s.heldRetry = minHeldRetry
		s.scheduleHeldRetry()
	}
}

// hold queues it behind the held events. A reply is not held: the client is
// told at once that its request took effect but its event is not journaled.
func (s *Supervisor) hold(it pending) {
	if it.refuse != nil {
		it.refuse(s.degraded)
		return
	}
	if it.ev != nil {
		s.heldEvents++
		s.m.held.Update(int64(s.heldEvents))
	}
	s.held = append(s.held, it)
}

func (s *Supervisor) scheduleHeldRetry() {
	d := s.heldRetry
	s.heldRetry = min(2*s.heldRetry, maxHeldRetry)
	s.clock.AfterFunc(d, func() { s.send(func(s *Supervisor) { s.retryHeld() }) })
}

// retryHeld appends and commits every held event in one batch. On success
// the daemon is healthy again: the events are published and the follow-ups
// run, in their order. On failure nothing changed and the next try is later.
func (s *Supervisor) retryHeld() {
	if s.degraded == nil || s.stopping {
		return
	}
	evs := make([]journal.Event, 0, s.heldEvents)
	for _, it := range s.held {
		if it.ev != nil {
			evs = append(evs, *it.ev)
		}
	}
	stored, err := s.journal.AppendBatch(evs)
	if err != nil {
		s.m.journalErrors.Inc(1)
		s.degraded = &JournalError{Dir: s.journalDir, Err: err}
		s.log.WithError(err).WithField("held", s.heldEvents).WithField("retry_in", s.heldRetry).
			Debug("journal still cannot write")
		s.scheduleHeldRetry()
		return
	}
	s.log.WithField("events", len(stored)).Warn("journal writes again: held events journaled and published; daemon no longer degraded")
	held := s.held
	s.held, s.heldEvents, s.degraded = nil, 0, nil
	s.m.held.Update(0)
	s.m.degraded.Update(0)
	s.m.events.Inc(int64(len(stored)))
	i := 0
	for _, it := range held {
		if it.ev != nil {
			*it.ev = stored[i]
			i++
		}
		s.release(it)
	}
}

// release runs what was waiting for the journal: publishes an event, runs a
// follow-up or reply.
func (s *Supervisor) release(it pending) {
	switch {
	case it.ev != nil:
		s.publish(*it.ev)
	case it.then != nil:
		it.then()
	}
}
