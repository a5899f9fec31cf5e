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

// Since returns the retained events whose Timestamp is strictly after t, in
// order, only those of container id when id != "". Strictly after is what a
// v0.2 client needs: it resumes from the timestamp of the last event it saw,
// and timestamps are strictly increasing, so nothing is skipped or repeated.
func (j *Journal) Since(t time.Time, id string) []Event {
	evs := j.snapshot()
	i := sort.Search(len(evs), func(i int) bool { return evs[i].Timestamp.After(t) })
	return filterID(evs[i:], id)
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
