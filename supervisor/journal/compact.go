package journal

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// compactStep names the points where a test can stop a file replacement
// (compaction or rewrite) as if the process had died there. Each is "about
// to do" the named thing.
type compactStep string

const (
	stepCreate  compactStep = "create-temp" // nothing written yet
	stepWrite   compactStep = "write-temp"  // temp file half written
	stepSync    compactStep = "sync-temp"   // temp fully written, not fsynced
	stepRename  compactStep = "rename"      // temp fsynced, not renamed
	stepSyncDir compactStep = "sync-dir"    // renamed, directory not fsynced
	stepTrim    compactStep = "trim-memory" // all on disk, memory not trimmed
)

// compactSteps lists every step in order, for tests.
var compactSteps = []compactStep{stepCreate, stepWrite, stepSync, stepRename, stepSyncDir, stepTrim}

// errSimulatedCrash is what a replacement stopped by Options.crashAt returns.
var errSimulatedCrash = errors.New("simulated crash")

func (j *Journal) crash(step compactStep) bool {
	return j.opts.crashAt != nil && j.opts.crashAt(step)
}

// threshold is the retained count above which Commit compacts. The slack of
// at least half the retain count makes the O(RetainCount) rewrite happen once
// per RetainCount/2 appends: amortised O(1) per append.
func (j *Journal) threshold() int {
	r := j.opts.RetainCount
	return r + max(r/2, 64)
}

// maybeCompact runs after a successful Commit, so every event is committed.
func (j *Journal) maybeCompact() {
	if j.opts.RetainCount == 0 || len(j.all) <= j.nextCompact {
		return
	}
	err := j.replaceFile()
	switch {
	case err == nil:
		j.stats.compactions.Add(1)
		j.nextCompact = j.threshold()
	case errors.Is(err, errSimulatedCrash):
		j.halted = err
	default:
		// Either the old file is intact and still in use, or the new one is
		// in place but its rename may not be durable (then the file is
		// untrusted and the next Commit rewrites it). Retry after another
		// slack's worth of appends, not on every one.
		j.stats.compactionErrors.Add(1)
		j.nextCompact = len(j.all) + j.threshold() - j.opts.RetainCount
		j.log.WithError(err).Warn("journal: compaction failed; keeping the uncompacted file")
	}
}

// rewrite replaces an untrusted file with the retained events from memory,
// the uncommitted ones included.
func (j *Journal) rewrite() error {
	if err := j.replaceFile(); err != nil {
		if errors.Is(err, errSimulatedCrash) {
			j.halted = err
		}
		return err
	}
	j.stats.rewrites.Add(1)
	return nil
}

// replaceFile writes the last RetainCount events (all when unbounded) to a
// new temp file in the same directory, fsyncs it, renames it over the
// journal and fsyncs the directory. At every moment either the old or the
// new complete file is at j.path, so a crash cannot lose a retained event.
// The temp file is fsynced whatever the policy: a rename of unsynced data
// can leave an empty file after power loss. Success leaves the file trusted.
func (j *Journal) replaceFile() error {
	keep := j.all
	if r := j.opts.RetainCount; r > 0 {
		keep = j.all[max(0, len(j.all)-r):]
	}
	tmp, size, err := j.writeTemp(keep)
	if err != nil {
		return err
	}
	if j.crash(stepRename) {
		return j.abandonTemp(tmp, errSimulatedCrash)
	}
	if err := j.opts.fs.Rename(tmp.Name(), j.path); err != nil {
		return j.abandonTemp(tmp, fmt.Errorf("rename %s over the journal: %w", tmp.Name(), err))
	}
	// From here on j.path is the new file: append to it whatever happens next.
	j.swapFile(tmp, size, j.committedEnd(keep, size))
	if j.crash(stepSyncDir) {
		return errSimulatedCrash
	}
	if err := j.opts.fs.SyncDir(j.dir); err != nil {
		// The rename may not survive a power loss: not trusted until rewritten.
		j.untrusted = true
		return err
	}
	j.untrusted = false
	if j.crash(stepTrim) {
		return errSimulatedCrash
	}
	j.trim(keep)
	return nil
}

// committedEnd is where the committed events of keep end in the new file:
// the uncommitted ones are its last records.
func (j *Journal) committedEnd(keep []Event, size int64) int64 {
	n := min(j.pending, len(keep))
	for _, ev := range keep[len(keep)-n:] {
		line, _ := appendRecord(nil, ev) // encoded before, so it cannot fail
		size -= int64(len(line))
	}
	return size
}

// writeTemp writes keep to a new fsynced temp file and returns it open, its
// offset at the end, ready to be appended to once renamed.
func (j *Journal) writeTemp(keep []Event) (file, int64, error) {
	if j.crash(stepCreate) {
		return nil, 0, errSimulatedCrash
	}
	tmp, err := j.opts.fs.CreateTemp(j.dir, j.tempPrefix()+"*")
	if err != nil {
		return nil, 0, fmt.Errorf("create journal temp file: %w", err)
	}
	size, err := j.fillTemp(tmp, keep)
	if err != nil {
		return nil, 0, j.abandonTemp(tmp, err)
	}
	if j.crash(stepSync) {
		return nil, 0, j.abandonTemp(tmp, errSimulatedCrash)
	}
	if err := tmp.Sync(); err != nil {
		return nil, 0, j.abandonTemp(tmp, fmt.Errorf("sync %s: %w", tmp.Name(), err))
	}
	return tmp, size, nil
}

func (j *Journal) fillTemp(tmp file, keep []Event) (int64, error) {
	w := bufio.NewWriterSize(tmp, 64<<10)
	var buf []byte
	var size int64
	for i, ev := range keep {
		if i == len(keep)/2 && j.crash(stepWrite) {
			return size, errors.Join(errSimulatedCrash, w.Flush())
		}
		var err error
		if buf, err = appendRecord(buf[:0], ev); err != nil {
			return size, err
		}
		if _, err := w.Write(buf); err != nil {
			return size, fmt.Errorf("write %s: %w", tmp.Name(), err)
		}
		size += int64(len(buf))
	}
	if err := w.Flush(); err != nil {
		return size, fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	return size, nil
}

// abandonTemp closes tmp and, unless this is a simulated crash (which must
// leave the disk as a dead process would), removes it.
func (j *Journal) abandonTemp(tmp file, cause error) error {
	tmp.Close()
	if !errors.Is(cause, errSimulatedCrash) {
		_ = j.opts.fs.Remove(tmp.Name())
	}
	return cause
}

func (j *Journal) swapFile(tmp file, size, committed int64) {
	old := j.file
	j.file, j.end, j.size, j.dirty = tmp, size, committed, false
	if err := old.Close(); err != nil {
		j.log.WithError(err).Warn("journal: closing the replaced file failed")
	}
}

// trim replaces the in-memory events with a NEW array holding keep: readers
// may still iterate the old one.
func (j *Journal) trim(keep []Event) {
	if len(keep) == len(j.all) {
		return
	}
	all := make([]Event, len(keep), j.threshold()+1)
	copy(all, keep)
	j.all = all
	j.pending = min(j.pending, len(all))
	if len(all) > 0 {
		j.clock.epochs = pruneEpochs(j.clock.epochs, all[0].Seq)
		j.committed.epochs = pruneEpochs(j.committed.epochs, all[0].Seq)
	}
	j.publish()
}

// tempPrefix names replacement files after the journal, hidden, so that
// removeStaleTemps finds exactly the leftovers of a crashed replacement.
func (j *Journal) tempPrefix() string {
	return "." + fileName + ".compact-"
}

// removeStaleTemps deletes temp files a crash left behind. They are never the
// journal itself (only a complete, synced one is renamed into place).
func (j *Journal) removeStaleTemps() {
	entries, err := os.ReadDir(j.dir)
	if err != nil {
		return // Open reports a real problem with the directory
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), j.tempPrefix()) && !strings.HasPrefix(e.Name(), "."+idFile+"-") {
			continue
		}
		name := filepath.Join(j.dir, e.Name())
		if err := j.opts.fs.Remove(name); err != nil {
			j.log.WithError(err).WithField("temp", name).Warn("journal: cannot remove leftover temp file")
			continue
		}
		j.log.WithField("temp", name).Info("journal: removed leftover temp file")
	}
}
