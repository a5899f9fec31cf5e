package journal

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"time"
)

// Replay streams committed events in seq order from the segments on disk,
// then from the newest segment's events in memory, decoding one record at a
// time: memory does not depend on how many it returns. It is used by one
// goroutine at a time; Close it when done early.
type Replay struct {
	v    view
	id   string
	ceil []time.Time // epochCeilings(v.epochs)

	seg    int         // index in v.sealed being read; len(v.sealed) means the cache
	sr     *segReader  // open reader of v.sealed[seg], nil when not opened yet
	pf     *prefetcher // decoding the sealed segments from seg on (from seg+1 while sr is open), if any
	long   bool        // read past a whole segment: prefetching pays
	inline int         // records read in line from the current segment
	off    int64       // where to start reading v.sealed[seg] when opening it
	ci     int         // next index in v.cache
	last   uint64      // seq of the last event returned or skipped: never go back
	skip   func(ev Event) bool
	err    error
}

func newReplay(v view, id string) *Replay {
	return &Replay{v: v, id: id, ceil: epochCeilings(v.epochs), last: v.floor}
}

// seekSeq positions the replay at the first event with Seq >= want.
func (r *Replay) seekSeq(want uint64) {
	r.skip = func(ev Event) bool { return ev.Seq < want }
	k := sort.Search(len(r.v.sealed), func(i int) bool { return r.v.sealed[i].sum.LastSeq >= want })
	r.seg = k
	if k == len(r.v.sealed) {
		r.ci = sort.Search(len(r.v.cache), func(i int) bool { return r.v.cache[i].Seq >= want })
		return
	}
	r.off = r.markBefore(k, func(m mark) bool { return m.Seq >= want })
}

// seekTime positions the replay at the first event whose effective time is
// after t (effective times never decrease along the journal).
func (r *Replay) seekTime(t time.Time) {
	after := func(seq uint64, ts time.Time) bool { return r.effective(seq, ts).After(t) }
	r.skip = func(ev Event) bool { return !after(ev.Seq, ev.Timestamp) }
	k := sort.Search(len(r.v.sealed), func(i int) bool {
		s := r.v.sealed[i].sum
		return after(s.LastSeq, s.LastTS)
	})
	r.seg = k
	if k == len(r.v.sealed) {
		r.ci = sort.Search(len(r.v.cache), func(i int) bool { return after(r.v.cache[i].Seq, r.v.cache[i].Timestamp) })
		return
	}
	r.off = r.markBefore(k, func(m mark) bool { return after(m.Seq, m.TS) })
}

// markBefore returns the offset of the last seek mark of segment k before
// the first one that is past the wanted position (0 if the index cannot be
// read: the segment is then read from its start).
func (r *Replay) markBefore(k int, past func(mark) bool) int64 {
	marks, err := readMarks(r.v.sealed[k].idxPath())
	if err != nil {
		return 0
	}
	i := sort.Search(len(marks), func(i int) bool { return past(marks[i]) })
	if i == 0 {
		return 0
	}
	return marks[i-1].Off
}

// Next returns the next event, io.EOF at the end, or an error reading a
// segment (then the replay is over).
func (r *Replay) Next() (Event, error) {
	// A full replay spends most of its calls here: the next event of a
	// segment already decoded, the replay positioned. It is checked in
	// place and copied out once, instead of passing by value through
	// advance, fromPrefetch and the prefetcher. The rules are the loop's
	// below.
	if pf := r.pf; pf != nil && r.skip == nil && r.err == nil {
		for pf.i < len(pf.cur) {
			ev := &pf.cur[pf.i]
			pf.i++
			if ev.Seq <= r.last {
				continue
			}
			r.last = ev.Seq
			if r.id == "" || ev.ID == r.id {
				return *ev, nil
			}
		}
	}
	for r.err == nil {
		ev, err := r.advance()
		if err != nil {
			r.err = err
			break
		}
		if ev.Seq <= r.last {
			continue // at or below the floor, or a stray record out of order
		}
		if r.skip != nil && r.skip(ev) {
			continue
		}
		r.skip = nil // positioned: everything after is wanted
		r.last = ev.Seq
		if r.id == "" || ev.ID == r.id {
			return ev, nil
		}
	}
	r.Close()
	return Event{}, r.err
}

// advance returns the next record, from the sealed segments then the cache.
func (r *Replay) advance() (Event, error) {
	for r.seg < len(r.v.sealed) {
		if r.long && r.pf == nil && r.sr == nil && len(r.v.sealed)-r.seg >= 2 {
			r.pf = startPrefetch(r.v.sealed[r.seg:], r.off)
		}
		if r.pf != nil && r.sr == nil { // an in-line reader first ends its segment
			return r.fromPrefetch()
		}
		if r.sr == nil {
			sr, err := openSegment(r.v.sealed[r.seg], r.off)
			if err != nil {
				return Event{}, err
			}
			r.sr, r.inline = sr, 0
		}
		ev, err := r.sr.next()
		if err == nil {
			r.inline++
			r.prefetchNext()
			return ev, nil
		}
		r.sr.close()
		r.sr, r.off = nil, 0
		if !errors.Is(err, io.EOF) {
			return Event{}, err
		}
		r.seg++
		r.long = true // a whole segment read: worth decoding ahead
	}
	if r.ci < len(r.v.cache) {
		r.ci++
		return r.v.cache[r.ci-1], nil
	}
	return Event{}, io.EOF
}

// prefetchAfter is how many records a replay reads in line from a segment
// before it has the segments after it decoded ahead, while it reads on.
// Waiting for the end of the segment left the other core idle for the
// whole of it, and then the replay waited for the next segment's decoding.
// A replay that is this far in will almost always read on to the end of
// the journal (Since the last 100 events and Oldest stop long before).
const prefetchAfter = 1024

// prefetchNext starts decoding the segments after the one being read in
// line once the replay is prefetchAfter records into it; the replay moves
// to them when this one ends.
func (r *Replay) prefetchNext() {
	if r.inline == prefetchAfter && r.pf == nil && r.seg+1 < len(r.v.sealed) {
		r.pf = startPrefetch(r.v.sealed[r.seg+1:], 0)
	}
}

// fromPrefetch returns the next decoded event; after the last sealed
// segment it hands over to the cache.
func (r *Replay) fromPrefetch() (Event, error) {
	ev, err := r.pf.next()
	if !errors.Is(err, io.EOF) {
		return ev, err
	}
	r.pf.close()
	r.pf, r.seg = nil, len(r.v.sealed)
	return r.advance()
}

// Close releases the open segment, if any. Safe to call more than once.
func (r *Replay) Close() {
	if r.sr != nil {
		r.sr.close()
		r.sr = nil
	}
	if r.pf != nil {
		r.pf.close()
		r.pf = nil
	}
	if r.err == nil {
		r.err = io.EOF
	}
}

// segReader decodes the records of a sealed segment from an offset up to
// the size its index gives. Invalid lines are skipped (Open reported them).
type segReader struct {
	f    *os.File
	br   *bufio.Reader
	left int64
	dec  *decoder // from the pool: a short replay does not make a string table
}

func openSegment(s sealed, off int64) (*segReader, error) {
	f, err := os.Open(s.logPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("segment %s: %w", s.logPath(), ErrNotRetained)
	}
	if err != nil {
		return nil, fmt.Errorf("read journal segment: %w", err)
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("read journal segment: %w", err)
	}
	return &segReader{f: f, br: bufio.NewReaderSize(f, 64<<10), left: s.sum.Size - off, dec: getDecoder()}, nil
}

func (sr *segReader) next() (Event, error) {
	for sr.left > 0 {
		line, n, complete, err := readLine(sr.br)
		if err != nil {
			return Event{}, io.EOF // shorter than indexed: what is there was read
		}
		sr.left -= n
		if !complete {
			continue
		}
		if ev, err := sr.dec.decode(trimNULs(line[:len(line)-1])); err == nil {
			return ev, nil
		}
	}
	return Event{}, io.EOF
}

func (sr *segReader) close() {
	sr.f.Close()
	if sr.dec != nil {
		decoders.Put(sr.dec)
		sr.dec = nil
	}
}
