package journal

import "io"

// Backward streams the served events newest first: the newest segment's
// from memory, then each sealed segment decoded whole (one at a time). A
// reader that needs only recent history (restore, looking for the starts
// of the containers it found) stops early instead of reading the journal.
type Backward struct {
	v    view
	seg  int     // next sealed segment to decode, counting down
	cur  []Event // events being returned, newest last
	last uint64  // seq of the last event returned: strictly decreasing
	err  error
}

// Backward returns the served events, newest first.
func (j *Journal) Backward() *Backward {
	v := j.snapshot()
	return &Backward{v: v, seg: len(v.sealed) - 1, cur: v.cache, last: v.lastSeq + 1}
}

// Next returns the next older event, io.EOF past the oldest served one, or
// an error reading a segment (then the walk is over).
func (b *Backward) Next() (Event, error) {
	for b.err == nil {
		for len(b.cur) > 0 {
			ev := b.cur[len(b.cur)-1]
			b.cur = b.cur[:len(b.cur)-1]
			if ev.Seq <= b.v.floor {
				b.err = io.EOF
				return Event{}, b.err
			}
			if ev.Seq < b.last { // a stray record out of order is skipped
				b.last = ev.Seq
				return ev, nil
			}
		}
		if b.seg < 0 {
			b.err = io.EOF
			break
		}
		bt := decodeSegment(b.v.sealed[b.seg], 0)
		b.seg--
		b.cur, b.err = bt.evs, bt.err
	}
	return Event{}, b.err
}
