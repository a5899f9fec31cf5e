package supervisor

import (
	"time"

	"github.com/evjournal/containerd/supervisor/journal"
)

// emit journals ev and schedules its publication for after the commit.
// Called on the loop only.
func (s *Supervisor) emit(ev journal.Event) journal.Event {
	start := time.Now()
	stored, err := s.journal.Append(ev)
	s.m.journalAppend.UpdateSince(start)
	if err != nil {
		// The journal is broken (disk full, say). Live subscribers still get
		// the event: losing it for them too would be worse.
		s.m.journalErrors.Inc(1)
		s.log.WithError(err).WithField("container", ev.ID).WithField("type", ev.Type).
			Error("event could not be journaled; replay will miss it")
		stored = ev
		stored.Timestamp = s.clock.Now()
	}
	s.m.events.Inc(1)
	s.crash.afterAppend()
	s.afterCommit(func() { s.publish(stored) })
	return stored
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
