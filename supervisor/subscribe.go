package supervisor

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/evjournal/containerd/api/errdefs"
	"github.com/evjournal/containerd/supervisor/journal"
)

// subscriber is the loop's side of a subscription. Owned by the loop, except
// ch, which the client side reads.
type subscriber struct {
	id       string
	ch       chan journal.Event
	lastSeq  uint64
	lastTime time.Time
	err      error // why ch was closed; read by the client after ch is drained
}

// Subscription is the client's side: the replayed events, then live ones.
type Subscription struct {
	s      *Supervisor
	replay []journal.Event
	next   int
	sub    *subscriber // nil for a stored-only subscription
}

// Subscribe replays the journaled events the request selects and, unless it
// is stored-only, follows with the live ones. Replay and registration happen
// in one loop step, so no event falls between them or comes twice.
func (s *Supervisor) Subscribe(ctx context.Context, r SubscribeRequest) (*Subscription, error) {
	if r.StoredOnly && r.After.IsZero() && r.AfterSeq == 0 {
		return nil, ErrStoredOnlyNeedsTime
	}
	return call(ctx, s, "subscribe", func(done func(*Subscription, error)) {
		if err := s.checkRetained(r.AfterSeq); err != nil {
			done(nil, err)
			return
		}
		done(s.subscribe(r), nil)
	})
}

// checkRetained refuses a resume by sequence number whose next event was
// already compacted out of the journal (--retain-count): replaying the rest
// would hide the gap. Timestamp resumes (v0.2 clients) cannot be told this
// without breaking them; they get what is retained, as in v0.2.
func (s *Supervisor) checkRetained(afterSeq uint64) error {
	if afterSeq == 0 {
		return nil
	}
	all := s.journal.After(s.servedFloor(), "")
	// The next event wanted is afterSeq+1 (written so as not to overflow).
	if len(all) == 0 || afterSeq >= all[0].Seq-1 {
		return nil
	}
	return errdefs.Mark(fmt.Errorf("containerd: events after seq %d are no longer retained: the oldest retained is seq %d (raise --retain-count)",
		afterSeq, all[0].Seq), errdefs.ErrFailedPrecondition)
}

// servedFloor is the Seq at and below which no event is served: a client
// never sees more than the last --retain-count events. The journal itself
// keeps up to about half as many again between two compactions (so that
// compaction stays amortised O(1) per append); those are not served.
// Sequence numbers are consecutive, so the last N are those above last-N.
func (s *Supervisor) servedFloor() uint64 {
	n := uint64(s.cfg.RetainCount)
	last, _ := s.journal.Last()
	if s.cfg.RetainCount <= 0 || last <= n {
		return 0
	}
	return last - n
}

func (s *Supervisor) subscribe(r SubscribeRequest) *Subscription {
	var replay []journal.Event
	floor := s.servedFloor()
	switch {
	case r.AfterSeq != 0:
		replay = s.journal.After(max(r.AfterSeq, floor), r.ID)
	case !r.After.IsZero():
		replay = s.journal.Since(r.After, r.ID)
		i := sort.Search(len(replay), func(i int) bool { return replay[i].Seq > floor })
		replay = replay[i:]
	}
	out := &Subscription{s: s, replay: replay}
	if r.StoredOnly {
		return out
	}
	sub := &subscriber{id: r.ID, ch: make(chan journal.Event, s.cfg.SubscriberBuffer)}
	// Resume point if cut off before any live event: everything up to the
	// journal's end at this instant was available to the replay.
	sub.lastSeq, sub.lastTime = s.journal.Last()
	s.subs[sub] = struct{}{}
	s.m.subscribers.Update(int64(len(s.subs)))
	out.sub = sub
	return out
}

// Next returns the next event. It returns io.EOF at the end of a stored-only
// replay, *LagError when the subscriber was cut off for being slow,
// ErrStopped when the supervisor stops, or ctx's error.
func (sub *Subscription) Next(ctx context.Context) (journal.Event, error) {
	if sub.next < len(sub.replay) {
		ev := sub.replay[sub.next]
		sub.next++
		return ev, nil
	}
	if sub.sub == nil {
		return journal.Event{}, io.EOF
	}
	select {
	case ev, ok := <-sub.sub.ch:
		if !ok {
			return journal.Event{}, sub.sub.err
		}
		return ev, nil
	case <-ctx.Done():
		return journal.Event{}, ctx.Err()
	}
}

// Close unsubscribes. Safe to call more than once and after Stop.
func (sub *Subscription) Close() {
	if sub.sub == nil {
		return
	}
	s, target := sub.s, sub.sub
	select {
	case s.tasks <- func(s *Supervisor) {
		if _, ok := s.subs[target]; ok {
			s.cutOff(target, io.EOF)
		}
	}:
	case <-s.loopDone:
	case <-s.stopCh:
	}
}
