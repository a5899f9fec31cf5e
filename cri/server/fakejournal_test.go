package server

import (
	"context"
	"sync"
	"time"

	"github.com/evjournal/containerd/supervisor"
	"github.com/evjournal/containerd/supervisor/journal"
)

// fakeJournal is the journal as GetContainerEvents sees it (EventSource):
// the events the fake loop emitted, in order, replayed to a new stream from
// a time and then followed live. lag ends every stream that has read all
// the events so far with the loop's *supervisor.LagError.
type fakeJournal struct {
	mu      sync.Mutex
	events  []journal.Event // guarded by mu
	lagAt   int             // streams that read this many end lagging; -1: none; guarded by mu
	skew    time.Duration   // added to the clock that stamps events; guarded by mu
	changed chan struct{}   // closed and replaced at each change; guarded by mu
}

func newFakeJournal() *fakeJournal { return &fakeJournal{lagAt: -1, changed: make(chan struct{})} }

var _ EventSource = (*fakeJournal)(nil)

// append journals ev: the next seq, and a timestamp after the last one
// unless it has one.
func (j *fakeJournal) append(ev journal.Event) journal.Event {
	j.mu.Lock()
	defer j.mu.Unlock()
	ev.Seq = uint64(len(j.events)) + 1
	if ev.Timestamp.IsZero() {
		ev.Timestamp = time.Now().Add(j.skew)
		if n := len(j.events); n > 0 && !ev.Timestamp.After(j.events[n-1].Timestamp) {
			ev.Timestamp = j.events[n-1].Timestamp.Add(time.Nanosecond)
		}
	}
	j.events = append(j.events, ev)
	j.notify()
	return ev
}

// setSkew stamps the next events d from now.
func (j *fakeJournal) setSkew(d time.Duration) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.skew = d
}

// lag cuts off the streams once they have read every event so far.
func (j *fakeJournal) lag() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.lagAt = len(j.events)
	j.notify()
}

func (j *fakeJournal) notify() {
	close(j.changed)
	j.changed = make(chan struct{})
}

// Events replays the events stamped after after (none when it is zero, as
// the supervisor's Subscribe), then follows.
func (j *fakeJournal) Events(_ context.Context, after time.Time) (EventStream, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	pos := len(j.events)
	if !after.IsZero() {
		for pos > 0 && j.events[pos-1].Timestamp.After(after) {
			pos--
		}
	}
	return &fakeStream{j: j, pos: pos}, nil
}

type fakeStream struct {
	j   *fakeJournal
	pos int // the next event's index; owned by the reader
}

func (s *fakeStream) Next(ctx context.Context) (journal.Event, error) {
	for {
		s.j.mu.Lock()
		if s.j.lagAt >= 0 && s.pos >= s.j.lagAt {
			lag := &supervisor.LagError{}
			if s.pos > 0 {
				lag.LastSeq, lag.LastTimestamp = s.j.events[s.pos-1].Seq, s.j.events[s.pos-1].Timestamp
			}
			s.j.mu.Unlock()
			return journal.Event{}, lag
		}
		if s.pos < len(s.j.events) {
			ev := s.j.events[s.pos]
			s.pos++
			s.j.mu.Unlock()
			return ev, nil
		}
		changed := s.j.changed
		s.j.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return journal.Event{}, ctx.Err()
		}
	}
}

func (s *fakeStream) Close() {}
