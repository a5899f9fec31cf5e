package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sirupsen/logrus"
)

// fileName is the single-file journal of v0.2 and of this project before
// segments; found in the journal directory with no segment, it is imported.
const fileName = "events.log"

// load reads the segments: the summaries of the sealed ones (their index's
// first line; a segment whose index is missing or does not match is scanned
// and indexed again) and every event of the newest one.
func (j *Journal) load() error {
	sf, err := listSegments(j.dir)
	if err != nil {
		return fmt.Errorf("open journal: %w", err)
	}
	j.removeOrphanIndexes(sf)
	src := ""
	if len(sf.bases) == 0 {
		src = j.importSource()
	}
	// A journal without segments is new, unless it continues this
	// directory's own single-file journal (same events, same id).
	isNew := len(sf.bases) == 0 && src != filepath.Join(j.dir, fileName)
	if err := j.establishID(isNew); err != nil {
		return err
	}
	if src != "" {
		if err := j.importFile(src); err != nil {
			return err
		}
		if sf, err = listSegments(j.dir); err != nil {
			return fmt.Errorf("open journal: %w", err)
		}
	}
	if err := j.loadSealed(sf); err != nil {
		return err
	}
	j.committed = j.clock
	j.publish()
	return nil
}

func (j *Journal) removeOrphanIndexes(sf segFiles) {
	for base, hasLog := range sf.idx {
		if hasLog {
			continue
		}
		path := filepath.Join(j.dir, segName(base, segIdx))
		if err := j.opts.fs.Remove(path); err != nil {
			j.log.WithError(err).WithField("index", path).Warn("journal: cannot remove the index of a removed segment")
		}
	}
}

// loadSealed walks the segments oldest first. The newest is the active one
// unless it has a valid index (a crash right after sealing it): then a new
// active segment is started after it.
func (j *Journal) loadSealed(sf segFiles) error {
	for i, base := range sf.bases {
		last := i == len(sf.bases)-1
		sum, ok := j.indexed(sf, base)
		if last && !ok {
			j.dropIndex(sf, base)
			return j.loadActive(base)
		}
		if !ok {
			sum, ok = j.reindex(base)
		}
		if ok {
			j.addSealed(sealed{dir: j.dir, sum: sum})
		}
	}
	if len(sf.bases) == 0 {
		return j.startActive(j.clock.seq+1, true)
	}
	return j.startActive(j.clock.seq+1, false)
}

// indexed returns a sealed segment's summary if its index is readable and
// matches the file's size exactly (a sealed segment never changes; one cut
// short by damage, or appended to after a seal that failed half way, is
// scanned again).
func (j *Journal) indexed(sf segFiles, base uint64) (summary, bool) {
	if !sf.idx[base] {
		return summary{}, false
	}
	sum, err := readSummary(filepath.Join(j.dir, segName(base, segIdx)))
	if err != nil || sum.Base != base || sf.size[base] != sum.Size {
		j.log.WithError(err).WithField("segment", segName(base, segLog)).Warn("journal: segment index missing or stale; scanning the segment")
		return summary{}, false
	}
	return sum, true
}

// addSealed appends a segment's summary and epochs to the loaded state. A
// segment wholly at or below the seqs already loaded (a stray copy) is
// skipped with a warning; a partial overlap is skipped record by record at
// read time.
func (j *Journal) addSealed(s sealed) {
	sum := s.sum
	if sum.LastSeq <= j.clock.seq {
		j.stats.outOfOrder.Add(uint64(sum.Count))
		j.log.WithFields(logrus.Fields{"segment": s.logPath(), "last_seq": sum.LastSeq, "previous_seq": j.clock.seq}).
			Warn("journal: skipping a segment whose seqs are not above the previous one's")
		return
	}
	if len(j.clock.epochs) == 0 && (len(sum.Epochs) == 0 || sum.Epochs[0].FirstSeq != sum.FirstSeq) {
		j.clock.epochs = append(j.clock.epochs, epochStart{sum.FirstEpoch, sum.FirstSeq, sum.FirstTS})
	}
	for _, e := range sum.Epochs {
		j.clock.epochs = append(j.clock.epochs, epochStart{e.Epoch, e.FirstSeq, e.FirstTS})
	}
	j.clock.seq, j.clock.ts, j.clock.epoch = sum.LastSeq, sum.LastTS, sum.LastEpoch
	j.sealed = append(j.sealed, s)
	j.stats.loaded.Add(uint64(sum.Count))
}

// reindex scans a sealed segment whose index is missing or stale and writes
// a new index (best effort: the scan is redone at the next Open otherwise).
func (j *Journal) reindex(base uint64) (summary, bool) {
	path := filepath.Join(j.dir, segName(base, segLog))
	f, err := os.Open(path)
	if err != nil {
		j.log.WithError(err).WithField("segment", path).Warn("journal: cannot read a segment; skipping it")
		return summary{}, false
	}
	defer f.Close()
	x := newIndexer(base)
	l := j.newLoader(j.clockAtEnd(), func(ev Event, off, n int64, newEpoch bool) { x.add(ev, off, n, newEpoch) })
	if err := l.read(f); err != nil {
		j.log.WithError(err).WithField("segment", path).Warn("journal: cannot read a segment; skipping it")
		return summary{}, false
	}
	l.summarise()
	if x.sum.Count == 0 {
		return summary{}, false
	}
	if err := j.writeIndex(x); err != nil {
		j.log.WithError(err).WithField("segment", path).Warn("journal: cannot write a segment index")
	}
	return x.sum, true
}

// clockAtEnd is the loaded state with only the newest epoch, what a scan of
// the next segment continues from.
func (j *Journal) clockAtEnd() clockState {
	c := j.clock
	c.epochs = nil
	if n := len(j.clock.epochs); n > 0 {
		c.epochs = []epochStart{j.clock.epochs[n-1]}
	}
	return c
}

// dropIndex removes a stale index of the segment that becomes the active
// one: appends would otherwise make the segment long enough to pass for
// the stale index's at the next Open.
func (j *Journal) dropIndex(sf segFiles, base uint64) {
	if !sf.idx[base] {
		return
	}
	path := filepath.Join(j.dir, segName(base, segIdx))
	if err := j.opts.fs.Remove(path); err != nil {
		j.log.WithError(err).WithField("index", path).Warn("journal: cannot remove a stale segment index")
	}
}

// loadActive reads every event of the newest segment and cuts its torn tail.
func (j *Journal) loadActive(base uint64) error {
	a, err := j.openActive(base)
	if err != nil {
		return err
	}
	j.active = a
	prev := j.clockAtEnd()
	l := j.newLoader(prev, func(ev Event, off, _ int64, _ bool) {
		a.evs = append(a.evs, ev)
		a.offs = append(a.offs, off)
	})
	if err := l.read(a.file); err != nil {
		return fmt.Errorf("read journal segment %s: %w", a.path, err)
	}
	l.summarise()
	j.clock.seq, j.clock.ts, j.clock.epoch = l.clock.seq, l.clock.ts, l.clock.epoch
	j.clock.epochs = append(j.clock.epochs, l.clock.epochs[len(prev.epochs):]...)
	j.cutTail(l)
	j.fixMode()
	return nil
}

// startActive opens the segment after the sealed ones. For a new journal
// the directory is synced so the first segment's entry is durable; if that
// fails the segment is rewritten before the first Commit.
func (j *Journal) startActive(base uint64, isNew bool) error {
	a, err := j.openActive(base)
	if err != nil {
		return err
	}
	j.active = a
	if isNew {
		if err := j.opts.fs.SyncDir(j.dir); err != nil {
			j.untrusted = true
			j.log.WithError(err).Warn("journal: cannot sync the directory of the new journal")
		}
	}
	return nil
}

// fixMode tightens a segment inherited from v0.2.9, which created 0755 files.
func (j *Journal) fixMode() {
	f := j.active.file
	fi, err := f.Stat()
	if err != nil || fi.Mode().Perm() == 0o600 {
		return
	}
	if err := f.Chmod(0o600); err != nil {
		j.log.WithError(err).Warn("journal: cannot set file mode to 0600")
	}
}

// establishID reads the journal's id, or makes a new one when the journal
// is new (no segment, nothing of its own to import) or has none yet. The new
// id is persisted before the first segment is created. If it cannot be, the
// id file left by a lost journal is removed (it must never be taken for this
// one's) and writing is retried before the first Commit.
func (j *Journal) establishID(isNew bool) error {
	if !isNew {
		j.id = readID(j.dir)
	}
	if j.id != "" {
		return nil
	}
	id, err := newID()
	if err != nil {
		return err
	}
	j.id = id
	if err := j.writeID(id); err != nil {
		j.idUnsaved = true
		j.log.WithError(err).Warn("journal: cannot write the journal id yet; retrying at the next commit")
		if rerr := j.opts.fs.Remove(filepath.Join(j.dir, idFile)); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			return fmt.Errorf("journal id in %s: %w", j.dir, errors.Join(err, rerr))
		}
	}
	return nil
}
