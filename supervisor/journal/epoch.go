package journal

import (
	"sort"
	"time"
)

// epochStepBack is how far the wall clock may be behind the last event
// before a new epoch starts. Below it, timestamps are pushed 1 ns past the
// previous one (small NTP slews and steps compress a little); above it, the
// clock wins, so one event stamped in the future (a bad RTC at boot) can
// never pin every later timestamp.
const epochStepBack = 5 * time.Second

// epochStart records where an epoch begins. Within an epoch timestamps
// strictly increase; each event carries its epoch number in the file, so
// the boundaries survive compaction and restarts.
type epochStart struct {
	epoch    uint32
	firstSeq uint64
	firstTS  time.Time
}

// clockState is what stamping needs: the newest event's seq, timestamp and
// epoch. It is copied whole to roll back a failed batch.
type clockState struct {
	seq    uint64
	ts     time.Time
	epoch  uint32
	epochs []epochStart // epochs that have retained events, oldest first
}

// next returns the timestamp and epoch of an event stamped now: the clock
// reading (UTC, no monotonic part, so the event in memory equals the one
// read back), at least 1 ns after the previous event in the same epoch, or
// a new epoch when the clock is far behind.
func (c *clockState) next(now time.Time) (time.Time, uint32, bool) {
	now = now.Round(0).UTC()
	switch {
	case c.seq == 0 && len(c.epochs) == 0, now.After(c.ts):
		return now, c.epoch, len(c.epochs) == 0
	case c.ts.Sub(now) > epochStepBack:
		return now, c.epoch + 1, true
	default:
		return c.ts.Add(time.Nanosecond).UTC(), c.epoch, false
	}
}

// advance records ev as the newest event.
func (c *clockState) advance(ev Event, newEpoch bool) {
	if newEpoch {
		c.epochs = append(c.epochs[:len(c.epochs):len(c.epochs)], epochStart{ev.Epoch, ev.Seq, ev.Timestamp})
	}
	c.seq, c.ts, c.epoch = ev.Seq, ev.Timestamp, ev.Epoch
}

// pruneEpochs drops the epochs that ended before firstSeq, keeping the one
// it falls in. A new slice: readers may hold the old one.
func pruneEpochs(eps []epochStart, firstSeq uint64) []epochStart {
	i := sort.Search(len(eps), func(i int) bool { return eps[i].firstSeq > firstSeq })
	return append([]epochStart(nil), eps[max(0, i-1):]...)
}

// epochCeilings returns, for each epoch, the earliest start of any later
// epoch: the wall time by which every event of that epoch had really
// happened, whatever its stamp says. The last epoch has none (zero time).
func epochCeilings(eps []epochStart) []time.Time {
	ceil := make([]time.Time, len(eps))
	var c time.Time
	for i := len(eps) - 1; i >= 0; i-- {
		ceil[i] = c
		if c.IsZero() || eps[i].firstTS.Before(c) {
			c = eps[i].firstTS
		}
	}
	return ceil
}

// effectiveTime is ev's timestamp capped by its epoch's ceiling. It never
// decreases from one event to the next, across epochs too, which is what
// lets "events since T" be one binary search.
func effectiveTime(ev Event, eps []epochStart, ceil []time.Time) time.Time {
	i := sort.Search(len(eps), func(i int) bool { return eps[i].firstSeq > ev.Seq }) - 1
	if i < 0 || ceil[i].IsZero() || ev.Timestamp.Before(ceil[i]) {
		return ev.Timestamp
	}
	return ceil[i]
}
