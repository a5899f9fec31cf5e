package journal

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"
)

// maxLineWarnings bounds the per-line warnings for skipped middle lines, so a
// journal full of garbage cannot flood the log; the rest go into one summary.
const maxLineWarnings = 10

// loader reads the journal once at Open. Invalid lines are held back until a
// valid line follows (then they were in the middle: skipped with a warning)
// or the file ends (then they are the torn tail: cut off).
type loader struct {
	j         *Journal
	off       int64      // bytes consumed so far
	end       int64      // end of the last valid record
	endsClean bool       // the consumed bytes end with a newline
	held      []badRange // invalid lines after the last valid one
	warned    int        // per-line warnings issued
	evs       []Event
	lastSeq   uint64
	lastTS    time.Time
	trimmed   bool // old events dropped from memory: the file needs compaction
}

type badRange struct {
	off, n int64
	err    error
}

// load fills j from its file, cuts a torn tail and publishes the events.
func (j *Journal) load() error {
	l := &loader{j: j, endsClean: true}
	if j.opts.RetainCount > 0 {
		// Sized once so memory never exceeds the threshold, even before the first compaction.
		l.evs = make([]Event, 0, j.threshold()+1)
	}
	if err := l.read(j.file); err != nil {
		return fmt.Errorf("read journal: %w", err)
	}
	l.summarise()
	j.all, j.lastSeq, j.lastTS = l.evs, l.lastSeq, l.lastTS
	j.size = l.end
	j.nextCompact = j.threshold()
	j.cutTail(l)
	j.publish()
	if l.trimmed {
		j.nextCompact = 0 // the file holds more than memory: compact in Open
	}
	return nil
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
	ev, err := decodeLine(bytes.TrimLeft(line[:len(line)-1], "\x00"))
	if err != nil {
		l.held = append(l.held, badRange{start, n, err})
		return
	}
	l.skipHeld()
	l.add(ev)
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

// add keeps the invariants the binary searches rely on: Seq and Timestamp
// strictly increasing. v0.2.9 records have no seq and take previous+1; a
// record that goes backwards (old clock steps, hand edits) is renumbered.
func (l *loader) add(ev Event) {
	fixed := ev.Seq != 0 && ev.Seq <= l.lastSeq
	if ev.Seq == 0 || fixed {
		ev.Seq = l.lastSeq + 1
	}
	if !ev.Timestamp.After(l.lastTS) {
		ev.Timestamp = l.lastTS.Add(time.Nanosecond)
		fixed = true
	}
	if fixed {
		l.j.stats.renumbered.Add(1)
	}
	l.lastSeq, l.lastTS = ev.Seq, ev.Timestamp
	l.evs = append(l.evs, ev)
	l.j.stats.loaded.Add(1)
	l.trim()
}

// trim keeps memory bounded by the retain count while loading a long file.
func (l *loader) trim() {
	r := l.j.opts.RetainCount
	if r == 0 || len(l.evs) <= l.j.threshold() {
		return
	}
	kept := make([]Event, r, l.j.threshold()+1)
	copy(kept, l.evs[len(l.evs)-r:])
	l.evs = kept
	l.trimmed = true
}

func (l *loader) summarise() {
	skipped := l.j.stats.skipped.Load()
	if skipped > maxLineWarnings {
		l.j.log.WithField("records", skipped).Warn("journal: skipped invalid records in the middle of the file")
	}
	if n := l.j.stats.renumbered.Load(); n > 0 {
		l.j.log.WithField("records", n).Warn("journal: fixed records whose seq or timestamp went backwards")
	}
}

// cutTail drops everything after the last valid record: a torn write, NULs
// or garbage. If the file cannot be truncated, a newline at least keeps the
// next record from being glued to the torn one.
func (j *Journal) cutTail(l *loader) {
	dropped := l.off - l.end
	if dropped == 0 {
		return
	}
	j.stats.droppedBytes.Add(uint64(dropped))
	j.stats.droppedRecords.Add(uint64(len(l.held)))
	j.log.WithFields(map[string]any{"offset": l.end, "dropped_bytes": dropped, "dropped_records": len(l.held)}).
		Warn("journal: cutting torn or invalid tail")
	if err := j.file.Truncate(l.end); err != nil {
		j.log.WithError(err).Warn("journal: cannot cut tail; the bad bytes stay and will be skipped")
		j.terminateTail(l)
		return
	}
	if err := j.syncFile(); err != nil {
		j.log.WithError(err).Warn("journal: cannot sync after cutting tail")
	}
}

func (j *Journal) terminateTail(l *loader) {
	j.size = l.off
	if l.endsClean {
		return
	}
	if _, err := j.file.Write([]byte{'\n'}); err != nil {
		j.broken = fmt.Errorf("journal tail can be neither cut nor terminated: %w", err)
		return
	}
	j.size++
}
