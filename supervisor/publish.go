package supervisor

import (
	"errors"
	"time"

	"github.com/evjournal/containerd/supervisor/journal"
)

// emit journals ev and schedules its publication for after the commit.
// While the journal cannot write, ev is held instead (degraded.go): it is
// published only once journaled. Called on the loop only.
func (s *Supervisor) emit(ev journal.Event) {
	if s.degraded != nil {
		s.applyToObjects(ev)
		s.hold(pending{ev: &ev})
		return
	}
	start := time.Now()
	stored, err := s.journal.Append(ev)
	s.m.journalAppend.UpdateSince(start)
	if err == nil {
		// As stamped by the journal: a replay applies these times.
		s.applyToObjects(stored)
	} else {
		s.applyToObjects(ev)
	}
	if errors.Is(err, journal.ErrInvalidArgument) {
		// This event can never be stored (it is malformed): holding it
		// would block every later one. It is dropped, never published.
		s.m.journalErrors.Inc(1)
		s.log.WithError(err).WithField("container", ev.ID).WithField("type", ev.Type).
			Error("event cannot be journaled; dropped")
		return
	}
	if err != nil {
		s.outbox = append(s.outbox, pending{ev: &ev})
		s.degrade(err)
		return
	}
	s.m.events.Inc(1)
	s.crash.afterAppend()
	s.outbox = append(s.outbox, pending{ev: &stored})
}

// afterCommit defers f until the events emitted so far are journaled and
// published: at the end of the loop's batch, or, while the journal cannot
// write, once the held events are journaled.
func (s *Supervisor) afterCommit(f func()) { s.queueAfter(pending{then: f}) }

// replyAfterCommit sends a reply that acknowledges the events emitted so
// far: ok once they are journaled; refuse with the journal's error at once
// if they are held instead (the request took effect, its event is not on
// disk yet: it is not acknowledged).
func (s *Supervisor) replyAfterCommit(ok func(), refuse func(error)) {
	s.queueAfter(pending{then: ok, refuse: refuse})
}

func (s *Supervisor) queueAfter(it pending) {
	if s.degraded != nil {
		s.hold(it)
		return
	}
	s.outbox = append(s.outbox, it)
}

// publish hands ev to every matching subscriber without blocking: one that
// has no room is cut off with the point to resume from.
func (s *Supervisor) publish(ev journal.Event) {
	for sub := range s.subs {
		if sub.id != "" && sub.id != ev.ID {
			continue
		}
		select {
		case sub.ch <- ev:
			sub.lastSeq, sub.lastTime = ev.Seq, ev.Timestamp
		default:
			s.m.lagged.Inc(1)
			s.log.WithField("last_seq", sub.lastSeq).Warn("event subscriber too slow: cut off with its resume point")
			s.cutOff(sub, &LagError{LastSeq: sub.lastSeq, LastTimestamp: sub.lastTime})
		}
	}
}

func (s *Supervisor) cutOff(sub *subscriber, err error) {
	sub.err = err
	close(sub.ch)
	delete(s.subs, sub)
	s.m.subscribers.Update(int64(len(s.subs)))
}

func (s *Supervisor) event(typ string, e *entry, pid string, status uint32) journal.Event {
	ev := journal.Event{Type: typ, ID: e.id, Pid: pid, Status: status}
	if e.c != nil {
		ev.Incarnation = e.c.Incarnation()
	}
	return ev
}
