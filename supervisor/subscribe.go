package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/internal/errmark"
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

// Subscription is the client's side: the replayed events, streamed from the
// journal, then live ones.
type Subscription struct {
	s      *Supervisor
	replay *journal.Replay // nil once drained
	sub    *subscriber     // nil for a stored-only subscription
}

// Subscribe replays the journaled events the request selects and, unless it
// is stored-only, follows with the live ones. Replay and registration happen
// in one loop step, so no event falls between them or comes twice; a
// stored-only replay, which registers nothing, skips the loop once it runs.
func (s *Supervisor) Subscribe(ctx context.Context, r SubscribeRequest) (*Subscription, error) {
	if r.StoredOnly && r.After.IsZero() && r.AfterSeq == 0 {
		return nil, ErrStoredOnlyNeedsTime
	}
	if r.StoredOnly && s.running() {
		// Nothing to register: the journal's committed view is safe to read
		// from any goroutine, and every event anyone has seen is in it
		// (commit precedes publish). Skipping the loop saves two goroutine
		// wake-ups per replay (bench: replay_last100_of_10m_grpc_ms).
		if err := s.checkCursor(r); err != nil {
			return nil, err
		}
		return s.subscribe(r), nil
	}
	return call(ctx, s, "subscribe", func(done func(*Subscription, error)) {
		if err := s.checkCursor(r); err != nil {
			done(nil, err)
			return
		}
		done(s.subscribe(r), nil)
	})
}

// checkCursor refuses a resume by sequence number that this journal cannot
// honour: one numbered by another journal (this one was lost and recreated,
// so its seqs start again at 1), one beyond the journal's end (the same
// cause when the client sent no journal id), or one whose next event is no
// longer retained. Serving any of them would silently skip events.
func (s *Supervisor) checkCursor(r SubscribeRequest) error {
	if r.AfterSeq == 0 {
		return nil
	}
	if r.JournalID != "" && r.JournalID != s.journal.ID() {
		return errmark.Mark(fmt.Errorf("containerd: seq %d is from journal %s, but this daemon's journal is %s (the old one was lost): resume from the start of this one",
			r.AfterSeq, r.JournalID, s.journal.ID()), errdefs.ErrFailedPrecondition)
	}
	if last, _ := s.journal.Last(); r.AfterSeq > last {
		return errmark.Mark(fmt.Errorf("containerd: seq %d is beyond the end of journal %s (last seq %d): it comes from another journal; resume from the start of this one",
			r.AfterSeq, s.journal.ID(), last), errdefs.ErrFailedPrecondition)
	}
	return s.checkRetained(r.AfterSeq)
}

// JournalID is the id of the journal that numbers the events (Event seqs
// mean something only with it).
func (s *Supervisor) JournalID() string { return s.journal.ID() }

// checkRetained refuses a resume by sequence number whose next event was
// already compacted out of the journal (--retain-count): replaying the rest
// would hide the gap. Timestamp resumes (v0.2 clients) cannot be told this
// without breaking them; they get what is retained, as in v0.2. The journal
// never serves more than the last --retain-count events.
func (s *Supervisor) checkRetained(afterSeq uint64) error {
	if afterSeq == 0 {
		return nil
	}
	oldest, ok := s.journal.Oldest()
	// The next event wanted is afterSeq+1 (written so as not to overflow).
	if !ok || afterSeq >= oldest.Seq-1 {
		return nil
	}
	return errmark.Mark(fmt.Errorf("containerd: events after seq %d are no longer retained: the oldest retained is seq %d (raise --retain-count)",
		afterSeq, oldest.Seq), errdefs.ErrFailedPrecondition)
}

func (s *Supervisor) subscribe(r SubscribeRequest) *Subscription {
	out := &Subscription{s: s}
	switch {
	case r.AfterSeq != 0:
		out.replay = s.journal.After(r.AfterSeq, r.ID)
	case !r.After.IsZero() && r.Retained:
		out.replay = s.journal.SinceRetained(r.After, r.ID)
	case !r.After.IsZero():
		out.replay = s.journal.Since(r.After, r.ID)
	}
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
	if sub.replay != nil {
		ev, err := sub.replay.Next()
		if err == nil {
			return ev, nil
		}
		sub.replay = nil
		if !errors.Is(err, io.EOF) {
			sub.closeLive()
			return journal.Event{}, replayError(err)
		}
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
	if sub.replay != nil {
		sub.replay.Close()
	}
	sub.closeLive()
}

func (sub *Subscription) closeLive() {
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

// replayError classifies a replay that failed midway: overtaken by
// retention, the client must resume from a retained point.
func replayError(err error) error {
	err = fmt.Errorf("containerd: replaying the journal: %w", err)
	if errors.Is(err, journal.ErrNotRetained) {
		return errmark.Mark(err, errdefs.ErrFailedPrecondition)
	}
	return err
}
