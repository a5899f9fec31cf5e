package journal

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math"
	"time"

	"github.com/sirupsen/logrus"
)

// maxLineWarnings bounds the per-line warnings for skipped middle lines, so a
// journal full of garbage cannot flood the log; the rest go into one summary.
const maxLineWarnings = 10

// loader scans one segment (or a v0.2 file being imported). Invalid lines
// are held back until a valid line follows (then they were in the middle:
// skipped with a warning) or the file ends (then they are the torn tail).
// Each valid record goes to emit with where it starts and its length.
type loader struct {
	j         *Journal
	off       int64      // bytes consumed so far
	end       int64      // end of the last valid record
	endsClean bool       // the consumed bytes end with a newline
	held      []badRange // invalid lines after the last valid one
	warned    int        // per-line warnings issued
	clock     clockState // the last record so far, the previous segments' included
	dec       decoder
	emit      func(ev Event, off, n int64, newEpoch bool)
}

type badRange struct {
	off, n int64
	err    error
}

func (j *Journal) newLoader(prev clockState, emit func(ev Event, off, n int64, newEpoch bool)) *loader {
	return &loader{j: j, endsClean: true, clock: prev, emit: emit}
}

func (l *loader) read(r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, n, complete, err := readLine(br)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		l.line(line, n, complete)
	}
}

// readLine returns the next line with its newline (complete), or the last
// piece of the file without one. A line longer than maxRecordSize is counted
// in n but only its start is kept: it is garbage anyway. The returned slice
// is valid until the next call.
func readLine(br *bufio.Reader) (line []byte, n int64, complete bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		n += int64(len(chunk))
		if err == nil && line == nil {
			return chunk, n, true, nil // common case: no copy
		}
		if len(line) <= maxRecordSize {
			line = append(line, chunk...)
		}
		switch {
		case err == nil:
			return line, n, true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && n > 0:
			return line, n, false, nil
		default:
			return nil, n, false, err
		}
	}
}

func (l *loader) line(line []byte, n int64, complete bool) {
	start := l.off
	l.off += n
	l.endsClean = complete
	if !complete {
		l.held = append(l.held, badRange{start, n, io.ErrUnexpectedEOF})
		return
	}
	// Leading NULs are what a crash leaves where a block was allocated but
	// never written; a record written after them is still good.
	ev, err := l.dec.decode(trimNULs(line[:len(line)-1]))
	if err != nil {
		l.held = append(l.held, badRange{start, n, err})
		return
	}
	l.skipHeld()
	l.add(ev, start, n)
	l.end = l.off
}

// skipHeld reports invalid lines that turned out to be followed by a valid
// one: they are skipped, never a reason to drop the valid events after them.
func (l *loader) skipHeld() {
	for _, b := range l.held {
		l.j.stats.skipped.Add(1)
		if l.warned < maxLineWarnings {
			l.warned++
			l.j.log.WithError(b.err).WithFields(map[string]any{"offset": b.off, "bytes": b.n}).
				Warn("journal: skipping invalid record")
		}
	}
	l.held = l.held[:0]
}

// add keeps the invariants the searches rely on: Seq strictly increasing,
// Timestamp strictly increasing within an epoch. A record whose seq is not
// above the previous one (a duplicated line, a hand edit) is skipped with a
// warning, never renumbered; v0.2.9 records have no seq and take previous+1.
func (l *loader) add(ev Event, off, n int64) {
	if ev.Seq == 0 && l.clock.seq < math.MaxUint64 {
		ev.Seq = l.clock.seq + 1
	}
	if ev.Seq <= l.clock.seq {
		l.skipOutOfOrder(ev)
		return
	}
	newEpoch := l.placeInEpoch(&ev)
	l.clock.advance(ev, newEpoch)
	l.j.stats.loaded.Add(1)
	l.emit(ev, off, n, newEpoch)
}

// placeInEpoch sets ev's epoch as the writer would have: the recorded one
// when it goes up, a new one when the timestamp is far behind the previous
// event's, else the previous event's, the timestamp pushed 1 ns past the
// previous one if needed (old v0.2 clock steps).
func (l *loader) placeInEpoch(ev *Event) bool {
	c := &l.clock
	switch {
	case c.seq == 0 && len(c.epochs) == 0:
		return true
	case ev.Epoch > c.epoch:
		return true
	case ev.Timestamp.After(c.ts):
		ev.Epoch = c.epoch
		return false
	case c.ts.Sub(ev.Timestamp) > epochStepBack:
		ev.Epoch = c.epoch + 1
		return true
	default:
		ev.Epoch = c.epoch
		ev.Timestamp = c.ts.Add(time.Nanosecond)
		l.j.stats.renumbered.Add(1)
		return false
	}
}

func (l *loader) skipOutOfOrder(ev Event) {
	if l.j.stats.outOfOrder.Add(1) > maxLineWarnings {
		return
	}
	l.j.log.WithFields(logrus.Fields{"offset": l.off, "seq": ev.Seq, "previous_seq": l.clock.seq}).
		Warn("journal: skipping a record whose seq is not above the previous one")
}

func (l *loader) summarise() {
	skipped := l.j.stats.skipped.Load()
	if skipped > maxLineWarnings {
		l.j.log.WithField("records", skipped).Warn("journal: skipped invalid records in the middle of the file")
	}
	if n := l.j.stats.renumbered.Load(); n > 0 {
		l.j.log.WithField("records", n).Warn("journal: pushed on timestamps that went back a little")
	}
	if n := l.j.stats.outOfOrder.Load(); n > maxLineWarnings {
		l.j.log.WithField("records", n).Warn("journal: skipped records whose seq was not above the previous one")
	}
}

// cutTail drops everything after the last valid record of the active
// segment: a torn write, NULs or garbage. If the file cannot be truncated, a
// newline at least keeps the next record from being glued to the torn one.
func (j *Journal) cutTail(l *loader) {
	a := j.active
	a.size, a.end = l.end, l.end
	dropped := l.off - l.end
	if dropped == 0 {
		return
	}
	j.stats.droppedBytes.Add(uint64(dropped))
	j.stats.droppedRecords.Add(uint64(len(l.held)))
	j.log.WithFields(logrus.Fields{"file": a.path, "offset": l.end, "dropped_bytes": dropped, "dropped_records": len(l.held)}).
		Warn("journal: cutting torn or invalid tail")
	if err := a.file.Truncate(l.end); err != nil {
		j.log.WithError(err).Warn("journal: cannot cut tail; the bad bytes stay and will be skipped")
		j.terminateTail(l)
		return
	}
	if err := j.syncActive(); err != nil {
		j.untrusted = true
		j.log.WithError(err).Warn("journal: cannot sync after cutting tail; the segment will be rewritten")
	}
}

func (j *Journal) terminateTail(l *loader) {
	a := j.active
	a.size, a.end = l.off, l.off
	if l.endsClean {
		return
	}
	if _, err := a.file.Write([]byte{'\n'}); err != nil {
		j.untrusted = true // rewritten from memory before the next commit
		return
	}
	a.size, a.end = a.size+1, a.end+1
}

// trimNULs drops leading NULs: what a crash leaves where a block was
// allocated but never written; a record written after them is still good.
func trimNULs(line []byte) []byte { return bytes.TrimLeft(line, "\x00") }
