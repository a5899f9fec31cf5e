package journal

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// activeSeg is the newest segment: the one appended to. All its events are
// in memory: they serve live catch-up, and they are what an untrusted
// segment is rewritten from.
type activeSeg struct {
	base    uint64
	path    string
	file    file
	evs     []Event // every event of the segment, uncommitted ones included
	offs    []int64 // where each of evs starts in the file
	pending int     // trailing events of evs appended since the last Commit
	size    int64   // end of the last committed record
	end     int64   // end of the last appended record (written or in unwritten)
	dirty   bool    // data written since the last fsync
	// unwritten holds the records appended since the last Commit under
	// SyncBatch and SyncNone: Commit writes them in one write(2) before it
	// syncs. A record per write cost the batch policy half its rate against
	// raw writes (bench: journal_append_per_s_batch); nothing appended is
	// visible before Commit anyway, and a crash before it loses those
	// events whether or not they had reached the page cache.
	unwritten []byte
}

func (a *activeSeg) add(ev Event, n int64) {
	a.evs = append(a.evs, ev)
	a.offs = append(a.offs, a.end-n)
	a.pending++
}

func (a *activeSeg) commit() {
	a.size = a.end
	a.pending = 0
}

// committedEvents is the committed prefix, capacity capped so that a
// reader can never see the writer's later appends.
func (a *activeSeg) committedEvents() []Event {
	n := len(a.evs) - a.pending
	return a.evs[:n:n]
}

// discard drops the uncommitted events from memory.
func (a *activeSeg) discard() int {
	n := a.pending
	a.evs = a.evs[:len(a.evs)-n]
	a.offs = a.offs[:len(a.offs)-n]
	a.pending = 0
	a.unwritten = a.unwritten[:0]
	return n
}

// truncate cuts the file back to the last committed record and puts the
// offset there (a rewritten file is not O_APPEND).
func (a *activeSeg) truncate(policy SyncPolicy) error {
	if err := a.file.Truncate(a.size); err != nil {
		return err
	}
	if _, err := a.file.Seek(a.size, 0); err != nil {
		return err
	}
	a.end = a.size
	if policy == SyncBatch {
		a.dirty = false // what is left was committed, so synced
	}
	return nil
}

// openActive opens (creating it if needed) the segment starting at base.
func (j *Journal) openActive(base uint64) (*activeSeg, error) {
	path := filepath.Join(j.dir, segName(base, segLog))
	f, err := j.opts.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open journal segment: %w", err)
	}
	return &activeSeg{base: base, path: path, file: f}, nil
}

// rewriteActive replaces an untrusted active segment with its events from
// memory, the uncommitted ones included: temp file, fsync, rename over the
// segment, directory fsync. At every moment either the old or the new
// complete file is in place. Success leaves the segment trusted.
func (j *Journal) rewriteActive() error {
	a := j.active
	tmp, offs, size, err := j.writeTemp(a.evs)
	if err != nil {
		return err
	}
	if j.crash(stepRename) {
		return j.abandonTemp(tmp, errSimulatedCrash)
	}
	if err := j.opts.fs.Rename(tmp.Name(), a.path); err != nil {
		return j.abandonTemp(tmp, fmt.Errorf("rename %s over %s: %w", tmp.Name(), a.path, err))
	}
	// From here on a.path is the new file: append to it whatever happens next.
	old := a.file
	a.file, a.offs, a.end, a.dirty = tmp, offs, size, false
	a.unwritten = a.unwritten[:0] // every event, these included, is in the new file
	a.size = size
	if a.pending > 0 {
		a.size = offs[len(offs)-a.pending]
	}
	if err := old.Close(); err != nil {
		j.log.WithError(err).Warn("journal: closing the replaced segment failed")
	}
	if j.crash(stepSyncDir) {
		return errSimulatedCrash
	}
	if err := j.opts.fs.SyncDir(j.dir); err != nil {
		return err // the rename may not survive a power loss: still untrusted
	}
	j.untrusted = false
	j.stats.rewrites.Add(1)
	return nil
}

// writeTemp writes evs to a new fsynced temp file and returns it open, its
// offset at the end, with where each record starts and the total size.
func (j *Journal) writeTemp(evs []Event) (file, []int64, int64, error) {
	if j.crash(stepCreate) {
		return nil, nil, 0, errSimulatedCrash
	}
	tmp, err := j.opts.fs.CreateTemp(j.dir, tempPrefix+"*")
	if err != nil {
		return nil, nil, 0, fmt.Errorf("create journal temp file: %w", err)
	}
	offs, size, err := j.fillTemp(tmp, evs)
	if err != nil {
		return nil, nil, 0, j.abandonTemp(tmp, err)
	}
	if j.crash(stepSync) {
		return nil, nil, 0, j.abandonTemp(tmp, errSimulatedCrash)
	}
	if err := tmp.Sync(); err != nil {
		return nil, nil, 0, j.abandonTemp(tmp, fmt.Errorf("sync %s: %w", tmp.Name(), err))
	}
	return tmp, offs, size, nil
}

func (j *Journal) fillTemp(tmp file, evs []Event) ([]int64, int64, error) {
	w := bufio.NewWriterSize(tmp, 64<<10)
	var buf []byte
	var size int64
	offs := make([]int64, 0, cap(evs))
	for i, ev := range evs {
		if i == len(evs)/2 && j.crash(stepWrite) {
			return nil, size, errors.Join(errSimulatedCrash, w.Flush())
		}
		var err error
		if buf, err = appendRecord(buf[:0], ev); err != nil {
			return nil, size, err
		}
		if _, err := w.Write(buf); err != nil {
			return nil, size, fmt.Errorf("write %s: %w", tmp.Name(), err)
		}
		offs = append(offs, size)
		size += int64(len(buf))
	}
	if err := w.Flush(); err != nil {
		return nil, size, fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	return offs, size, nil
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
