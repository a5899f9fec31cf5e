package journal

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// compactStep names the points where a test can stop a compaction as if the
// process had died there. Each is "about to do" the named thing.
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

// errSimulatedCrash is what a compaction stopped by Options.crashAt returns.
var errSimulatedCrash = errors.New("simulated crash")

func (j *Journal) crash(step compactStep) bool {
	return j.opts.crashAt != nil && j.opts.crashAt(step)
}

// threshold is the retained count above which Append compacts. The slack of
// at least half the retain count makes the O(RetainCount) rewrite happen once
// per RetainCount/2 appends: amortised O(1) per append.
func (j *Journal) threshold() int {
	r := j.opts.RetainCount
	return r + max(r/2, 64)
}

func (j *Journal) maybeCompact() {
	if j.opts.RetainCount == 0 || len(j.all) <= j.nextCompact {
		return
	}
	err := j.compact()
	switch {
	case err == nil:
		j.stats.compactions.Add(1)
		j.nextCompact = j.threshold()
	case errors.Is(err, errSimulatedCrash):
		j.broken = err
	default:
		// The old file is intact and still in use. Retry after another
		// slack's worth of appends, not on every one.
		j.stats.compactionErrors.Add(1)
		j.nextCompact = len(j.all) + j.threshold() - j.opts.RetainCount
		j.log.WithError(err).Warn("journal: compaction failed; keeping the uncompacted file")
	}
}

// compact rewrites the file with the last RetainCount events: new temp file
// in the same directory, fsync, rename over the journal, fsync the directory.
// At every moment either the old or the new complete file is at j.path, so a
// crash cannot lose a retained event. The temp file is fsynced whatever the
// policy: a rename of unsynced data can leave an empty file after power loss.
func (j *Journal) compact() error {
	keep := j.all[max(0, len(j.all)-j.opts.RetainCount):]
	tmp, size, err := j.writeTemp(keep)
	if err != nil {
		return err
	}
	if j.crash(stepRename) {
		return abandonTemp(tmp, errSimulatedCrash)
	}
	if err := os.Rename(tmp.Name(), j.path); err != nil {
		return abandonTemp(tmp, fmt.Errorf("rename compacted journal: %w", err))
	}
	// From here on j.path is the new file: append to it whatever happens next.
	j.swapFile(tmp, size)
	if j.crash(stepSyncDir) {
		return errSimulatedCrash
	}
	if err := syncDir(filepath.Dir(j.path)); err != nil {
		j.dirSyncPending = true
		j.log.WithError(err).Warn("journal: directory sync after compaction failed; retrying at next commit")
	}
	if j.crash(stepTrim) {
		return errSimulatedCrash
	}
	j.trim(keep)
	return nil
}

// writeTemp writes keep to a new fsynced temp file and returns it open, its
// offset at the end, ready to be appended to once renamed.
func (j *Journal) writeTemp(keep []Event) (*os.File, int64, error) {
	if j.crash(stepCreate) {
		return nil, 0, errSimulatedCrash
	}
	tmp, err := os.CreateTemp(filepath.Dir(j.path), j.tempPrefix()+"*")
	if err != nil {
		return nil, 0, fmt.Errorf("create compaction file: %w", err)
	}
	size, err := j.fillTemp(tmp, keep)
	if err != nil {
		return nil, 0, abandonTemp(tmp, err)
	}
	if j.crash(stepSync) {
		return nil, 0, abandonTemp(tmp, errSimulatedCrash)
	}
	if err := tmp.Sync(); err != nil {
		return nil, 0, abandonTemp(tmp, fmt.Errorf("sync compaction file: %w", err))
	}
	return tmp, size, nil
}

func (j *Journal) fillTemp(tmp *os.File, keep []Event) (int64, error) {
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
			return size, fmt.Errorf("write compaction file: %w", err)
		}
		size += int64(len(buf))
	}
	if err := w.Flush(); err != nil {
		return size, fmt.Errorf("write compaction file: %w", err)
	}
	return size, nil
}

// abandonTemp closes tmp and, unless this is a simulated crash (which must
// leave the disk as a dead process would), removes it.
func abandonTemp(tmp *os.File, cause error) error {
	tmp.Close()
	if !errors.Is(cause, errSimulatedCrash) {
		os.Remove(tmp.Name())
	}
	return cause
}

func (j *Journal) swapFile(tmp *os.File, size int64) {
	old := j.file
	j.file, j.size, j.dirty = tmp, size, false
	if err := old.Close(); err != nil {
		j.log.WithError(err).Warn("journal: closing the pre-compaction file failed")
	}
}

// trim replaces the in-memory events with a NEW array holding keep: readers
// may still iterate the old one.
func (j *Journal) trim(keep []Event) {
	all := make([]Event, len(keep), j.threshold()+1)
	copy(all, keep)
	j.all = all
	j.pending = min(j.pending, len(all))
	j.publish()
}

func (j *Journal) retryDirSync() error {
	if !j.dirSyncPending {
		return nil
	}
	if err := syncDir(filepath.Dir(j.path)); err != nil {
		return err
	}
	j.dirSyncPending = false
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open journal directory: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync journal directory: %w", err)
	}
	return nil
}

// tempPrefix names compaction files after the journal, hidden, so that
// removeStaleTemps finds exactly the leftovers of a crashed compaction.
func (j *Journal) tempPrefix() string {
	return "." + filepath.Base(j.path) + ".compact-"
}

// removeStaleTemps deletes temp files a crash left behind. They are never the
// journal itself (only a complete, synced one is renamed into place).
func (j *Journal) removeStaleTemps() {
	dir := filepath.Dir(j.path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return // Open reports a real problem with the directory
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), j.tempPrefix()) {
			continue
		}
		name := filepath.Join(dir, e.Name())
		if err := os.Remove(name); err != nil {
			j.log.WithError(err).WithField("temp", name).Warn("journal: cannot remove leftover compaction file")
			continue
		}
		j.log.WithField("temp", name).Info("journal: removed leftover compaction file")
	}
}
