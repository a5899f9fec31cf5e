package journal

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/sirupsen/logrus"
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
	clock     clockState
	trimmed   bool // old events dropped from memory: the file needs compaction
}

type badRange struct {
	off, n int64
	err    error
}

// loadAll fills j: from a v0.2 events.log to import when the journal is new
// and one is given, else from the journal's own file.
func (j *Journal) loadAll(created bool) error {
	legacy := j.opts.Legacy
	if !created || legacy == "" || filepath.Clean(legacy) == j.path {
		return j.load()
	}
	f, err := os.Open(legacy)
	if errors.Is(err, os.ErrNotExist) {
		return j.load()
	}
	if err != nil {
		return fmt.Errorf("open v0.2 journal to import: %w", err)
	}
	defer f.Close()
	l := j.newLoader()
	if err := l.read(f); err != nil {
		return fmt.Errorf("read v0.2 journal %s: %w", legacy, err)
	}
	l.summarise()
	j.adopt(l)
	j.untrusted = true // written out by settle
	j.log.WithFields(logrus.Fields{"from": legacy, "events": len(l.evs)}).Info("journal: importing a v0.2 journal; the old file is left in place")
	return nil
}

// load fills j from its file, cuts a torn tail and publishes the events.
func (j *Journal) load() error {
	l := j.newLoader()
	if err := l.read(j.file); err != nil {
		return fmt.Errorf("read journal: %w", err)
	}
	l.summarise()
	j.adopt(l)
	j.cutTail(l)
	return nil
}

func (j *Journal) newLoader() *loader {
	l := &loader{j: j, endsClean: true}
	if j.opts.RetainCount > 0 {
		// Sized once so memory never exceeds the threshold, even before the first compaction.
		l.evs = make([]Event, 0, j.threshold()+1)
	}
	return l
}

// adopt makes the loaded events the journal's committed state.
func (j *Journal) adopt(l *loader) {
	if len(l.evs) > 0 {
		l.clock.epochs = pruneEpochs(l.clock.epochs, l.evs[0].Seq)
	}
	j.all, j.clock, j.committed = l.evs, l.clock, l.clock
	j.size, j.end = l.end, l.end
	j.nextCompact = j.threshold()
	if l.trimmed {
		j.nextCompact = 0 // the file holds more than memory: compact in Open
	}
	j.publish()
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

// add keeps the invariants the searches rely on: Seq strictly increasing,
// Timestamp strictly increasing within an epoch. A record whose seq is not
// above the previous one (a duplicated line, a hand edit) is skipped with a
// warning, never renumbered; v0.2.9 records have no seq and take previous+1.
func (l *loader) add(ev Event) {
	if ev.Seq == 0 && l.clock.seq < math.MaxUint64 {
		ev.Seq = l.clock.seq + 1
	}
	if ev.Seq <= l.clock.seq {
		l.skipOutOfOrder(ev)
		return
	}
	newEpoch := l.placeInEpoch(&ev)
	l.clock.advance(ev, newEpoch)
	l.evs = append(l.evs, ev)
	l.j.stats.loaded.Add(1)
	l.trim()
}

// placeInEpoch sets ev's epoch as the writer would have: the recorded one
// when it goes up, a new one when the timestamp is far behind the previous
// event's, else the previous event's, the timestamp pushed 1 ns past the
// previous one if needed (old v0.2 clock steps).
func (l *loader) placeInEpoch(ev *Event) bool {
	c := &l.clock
	switch {
	case len(c.epochs) == 0:
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
		l.j.log.WithField("records", n).Warn("journal: pushed on timestamps that went back a little")
	}
	if n := l.j.stats.outOfOrder.Load(); n > maxLineWarnings {
		l.j.log.WithField("records", n).Warn("journal: skipped records whose seq was not above the previous one")
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
		j.untrusted = true
		j.log.WithError(err).Warn("journal: cannot sync after cutting tail; the file will be rewritten")
	}
}

func (j *Journal) terminateTail(l *loader) {
	j.size, j.end = l.off, l.off
	if l.endsClean {
		return
	}
	if _, err := j.file.Write([]byte{'\n'}); err != nil {
		j.untrusted = true // rewritten from memory before the next commit
		return
	}
	j.size, j.end = j.size+1, j.end+1
}
