package journal

import (
	"errors"
	"io"
	"sort"
	"time"
)

// view is what readers see: immutable once published (sealed and cache are
// never changed in place; the writer publishes new slices).
type view struct {
	sealed  []sealed     // sealed segments, oldest first
	cache   []Event      // committed events of the active segment
	epochs  []epochStart // epochs with retained events
	lastSeq uint64
	lastTS  time.Time
	floor   uint64 // events at or below this seq are not served (retain count)
}

// publish exposes every committed event.
func (j *Journal) publish() {
	v := view{
		sealed: j.sealed, cache: j.active.committedEvents(), epochs: j.committed.epochs,
		lastSeq: j.committed.seq, lastTS: j.committed.ts,
	}
	if r := uint64(j.opts.RetainCount); r > 0 && v.lastSeq > r {
		v.floor = v.lastSeq - r
	}
	j.mu.Lock()
	j.view = v
	j.mu.Unlock()
}

func (j *Journal) snapshot() view {
	j.mu.RLock()
	defer j.mu.RUnlock()
	return j.view
}

// ErrNotRetained is returned by Replay.Next when a segment it was about to
// read was removed by retention meanwhile (a replay slower than the
// journal's turnover): the events it held are no longer retained.
var ErrNotRetained = errors.New("events no longer retained")

// After returns a replay of the committed events with Seq > seq, in order,
// only those of container id when id != "". It never serves more than the
// last RetainCount events, and ends with the newest event committed when it
// was made: events committed later are not part of it.
func (j *Journal) After(seq uint64, id string) *Replay {
	v := j.snapshot()
	r := newReplay(v, id)
	r.seekSeq(max(seq, v.floor) + 1)
	return r
}

// AfterRetained is After without the RetainCount bound: every committed
// event with Seq > seq that is still on disk. It is for the daemon's own
// checkpointed readers (HoldRetention), whose events retention keeps.
func (j *Journal) AfterRetained(seq uint64) *Replay {
	v := j.snapshot()
	v.floor = 0
	r := newReplay(v, "")
	r.seekSeq(seq + 1)
	return r
}

// Since returns a replay of the committed events after t, filtered and
// bounded like After. "After t" is, across clock epochs:
//
//   - if t is exactly the timestamp of a retained event, the events after
//     that one: a v0.2 client resumes from the timestamp of the last event it
//     saw, and timestamps are unique within an epoch, so nothing is skipped
//     or repeated even when that event's epoch was stamped by a clock that
//     later went back (the newest such event wins if epochs share t);
//   - otherwise the events whose effective time is strictly after t. An
//     event's effective time is its timestamp capped by the start of every
//     later epoch: when the clock was found far behind, everything stamped
//     before had really happened by then. So "events since 10 minutes ago"
//     leaves out events stamped in the future by a bad clock long ago.
func (j *Journal) Since(t time.Time, id string) *Replay {
	return since(j.snapshot(), t, id)
}

// SinceRetained is Since without the RetainCount bound: every committed
// event after t that is still on disk (at least the last RetainCount). It
// is for a reader bounded otherwise: the CRI's backlog, by age.
func (j *Journal) SinceRetained(t time.Time, id string) *Replay {
	v := j.snapshot()
	v.floor = 0
	return since(v, t, id)
}

func since(v view, t time.Time, id string) *Replay {
	r := newReplay(v, id)
	if seq, ok := r.exactSeq(t); ok {
		r.seekSeq(max(seq, v.floor) + 1)
		return r
	}
	r.seekTime(t)
	return r
}

// Last returns the Seq and Timestamp of the newest visible event, zero values
// when there is none.
func (j *Journal) Last() (seq uint64, ts time.Time) {
	v := j.snapshot()
	return v.lastSeq, v.lastTS
}

// Oldest returns the oldest event served (the first of After(0, "")), and
// false when there is none.
func (j *Journal) Oldest() (Event, bool) {
	r := j.After(0, "")
	defer r.Close()
	ev, err := r.Next()
	return ev, err == nil
}

// Len returns the number of events served: those retained, at most
// RetainCount.
func (j *Journal) Len() int {
	n := j.Retained()
	if r := j.opts.RetainCount; r > 0 && n > r {
		return r
	}
	return n
}

// Retained returns the number of committed events kept on disk: up to a
// segment or two more than RetainCount, since only whole segments go.
func (j *Journal) Retained() int {
	v := j.snapshot()
	n := len(v.cache)
	for _, s := range v.sealed {
		n += s.sum.Count
	}
	return n
}

// Collect reads a replay to its end into a slice. For tests and small
// replays: a full replay of a large journal should be streamed with Next.
func Collect(r *Replay) ([]Event, error) {
	defer r.Close()
	var out []Event
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

// effective returns ev's effective time (see Since).
func (r *Replay) effective(seq uint64, ts time.Time) time.Time {
	return effectiveTime(Event{Seq: seq, Timestamp: ts}, r.v.epochs, r.ceil)
}

// exactSeq finds the newest retained event stamped exactly t whose
// effective time is before t (a capped epoch); for the others the search by
// effective time gives the same answer.
func (r *Replay) exactSeq(t time.Time) (uint64, bool) {
	if i, ok := exactIndex(r.v.cache, r.v.epochs, t); ok {
		return r.v.cache[i].Seq, true
	}
	for k := len(r.v.epochs) - 1; k >= 0; k-- {
		if r.ceil[k].IsZero() || !r.ceil[k].Before(t) {
			continue
		}
		hi := uint64(1<<64 - 1)
		if k+1 < len(r.v.epochs) {
			hi = r.v.epochs[k+1].firstSeq - 1
		}
		if seq, ok := r.exactInSealed(t, r.v.epochs[k].firstSeq, hi); ok {
			return seq, true
		}
	}
	return 0, false
}

// exactInSealed scans the sealed segments that may hold an event stamped t
// with a seq in [lo, hi]. Only clock jumps lead here.
func (r *Replay) exactInSealed(t time.Time, lo, hi uint64) (uint64, bool) {
	for i := len(r.v.sealed) - 1; i >= 0; i-- {
		s := r.v.sealed[i].sum
		if s.LastSeq < lo || s.FirstSeq > hi || t.Before(s.MinTS) || t.After(s.MaxTS) {
			continue
		}
		sr, err := openSegment(r.v.sealed[i], 0)
		if err != nil {
			continue
		}
		found, ok := uint64(0), false
		for ev, err := sr.next(); err == nil; ev, err = sr.next() {
			if ev.Seq >= lo && ev.Seq <= hi && ev.Timestamp.Equal(t) {
				found, ok = ev.Seq, true
			}
		}
		sr.close()
		if ok {
			return found, true
		}
	}
	return 0, false
}

// exactIndex finds the newest event of evs stamped exactly t: one binary
// search per epoch, newest epoch first.
func exactIndex(evs []Event, eps []epochStart, t time.Time) (int, bool) {
	hi := len(evs)
	for k := len(eps) - 1; k >= 0 && hi > 0; k-- {
		lo := sort.Search(hi, func(i int) bool { return evs[i].Seq >= eps[k].firstSeq })
		i := lo + sort.Search(hi-lo, func(i int) bool { return !evs[lo+i].Timestamp.Before(t) })
		if i < hi && evs[i].Timestamp.Equal(t) {
			return i, true
		}
		hi = lo
	}
	return 0, false
}
