package journal

import (
	"sort"
	"time"
)

// The read methods work on a snapshot of the published slice. The writer
// never changes a published element (compaction builds a new array), so a
// returned slice stays valid and unchanged while the caller iterates it from
// another goroutine. Callers must treat it as read-only.

func (j *Journal) snapshot() []Event {
	j.mu.RLock()
	defer j.mu.RUnlock()
	return j.pub
}

func (j *Journal) snapshotEpochs() ([]Event, []epochStart) {
	j.mu.RLock()
	defer j.mu.RUnlock()
	return j.pub, j.pubEpochs
}

// Since returns the retained events after t, in order, only those of
// container id when id != "". "After t" is, across clock epochs:
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
func (j *Journal) Since(t time.Time, id string) []Event {
	evs, eps := j.snapshotEpochs()
	if i, ok := exactIndex(evs, eps, t); ok {
		return filterID(evs[i+1:], id)
	}
	ceil := epochCeilings(eps)
	i := sort.Search(len(evs), func(i int) bool { return effectiveTime(evs[i], eps, ceil).After(t) })
	return filterID(evs[i:], id)
}

// exactIndex finds the newest retained event stamped exactly t: one binary
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

// After returns the retained events with Seq > seq, in order, filtered by id
// like Since. If the first one's Seq is above seq+1, events were compacted away.
func (j *Journal) After(seq uint64, id string) []Event {
	evs := j.snapshot()
	i := sort.Search(len(evs), func(i int) bool { return evs[i].Seq > seq })
	return filterID(evs[i:], id)
}

// filterID returns evs itself when no filter applies (no copy: replaying a
// large journal is then just a binary search) and a fresh slice otherwise.
func filterID(evs []Event, id string) []Event {
	if len(evs) == 0 {
		return nil
	}
	if id == "" {
		return evs
	}
	var out []Event
	for _, ev := range evs {
		if ev.ID == id {
			out = append(out, ev)
		}
	}
	return out
}

// Last returns the Seq and Timestamp of the newest visible event, zero values
// when there is none.
func (j *Journal) Last() (seq uint64, ts time.Time) {
	evs := j.snapshot()
	if len(evs) == 0 {
		return 0, time.Time{}
	}
	last := evs[len(evs)-1]
	return last.Seq, last.Timestamp
}

// Len returns the number of retained visible events.
func (j *Journal) Len() int {
	return len(j.snapshot())
}
