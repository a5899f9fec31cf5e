package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// compactStep names the points where a test built with -tags failpoints can
// stop a file operation as if the process had died there (failpoint.go).
// Each is "about to do" the named thing.
type compactStep string

const (
	// Rewriting an untrusted active segment from memory.
	stepCreate  compactStep = "create-temp" // nothing written yet
	stepWrite   compactStep = "write-temp"  // temp file half written
	stepSync    compactStep = "sync-temp"   // temp fully written, not fsynced
	stepRename  compactStep = "rename"      // temp fsynced, not renamed
	stepSyncDir compactStep = "sync-dir"    // renamed, directory not fsynced
	// Sealing a full segment.
	stepSealSync    compactStep = "seal-sync"     // segment not fsynced yet
	stepSealIndex   compactStep = "seal-index"    // segment fsynced, index not written
	stepSealCreate  compactStep = "seal-create"   // index in place, next segment not created
	stepSealSyncDir compactStep = "seal-sync-dir" // next segment created, directory not fsynced
	// Retention removing the oldest segment.
	stepRemoveLog compactStep = "remove-log" // nothing removed yet
	stepRemoveIdx compactStep = "remove-idx" // log removed, index not
)

// errSimulatedCrash is what an operation stopped at a failpoint returns; an
// operation that gets it leaves the disk as a dead process would.
var errSimulatedCrash = errors.New("simulated crash")

// crash reports whether a test stops the journal at step (failpoints).
func (j *Journal) crash(step compactStep) bool { return j.opts.failpoints.crash(step) }

// halted is the error every write fails with after a simulated crash.
func (j *Journal) halted() error { return j.opts.failpoints.halted() }

// tempPrefix names the journal's temp files (rewrites, indexes), hidden, so
// that removeStaleTemps finds exactly the leftovers of a crash.
const tempPrefix = ".seg-tmp-"

// maybeSeal seals the active segment once full. It runs after a Commit, so
// everything in it is committed. A failure is logged and retried at the
// Commit that has an eighth of a segment more; the active segment keeps
// growing meanwhile (bounded by roomInActive).
func (j *Journal) maybeSeal() {
	n := len(j.active.evs)
	if n < j.opts.segmentRecords || n < j.sealRetryAt || j.halted() != nil {
		return
	}
	if err := j.seal(); err != nil {
		if errors.Is(err, errSimulatedCrash) {
			return
		}
		if j.sealErr == nil {
			j.log.WithError(err).Warn("journal: cannot seal the full segment; retrying")
		}
		j.sealErr = fmt.Errorf("seal segment %s: %w", j.active.path, err)
		j.sealRetryAt = n + max(1, j.opts.segmentRecords/8) // not at every commit
		j.stats.sealErrors.Add(1)
		return
	}
	j.sealErr, j.sealRetryAt = nil, 0
	j.retain()
}

// seal fsyncs the active segment (whatever the policy: only the active
// segment may hold unsynced events), writes its index, starts the next
// segment and fsyncs the directory.
func (j *Journal) seal() error {
	a := j.active
	if j.crash(stepSealSync) {
		return errSimulatedCrash
	}
	if a.dirty {
		if err := j.syncActive(); err != nil {
			j.untrusted = true
			return err
		}
	}
	x := j.indexActive()
	if j.crash(stepSealIndex) {
		return errSimulatedCrash
	}
	if err := j.writeIndex(x); err != nil {
		return err
	}
	if j.crash(stepSealCreate) {
		return errSimulatedCrash
	}
	next, err := j.createSegment(j.clock.seq + 1)
	if err != nil {
		// Appends go on into this segment: its index must not stay.
		if rerr := j.opts.fs.Remove(filepath.Join(j.dir, segName(x.sum.Base, segIdx))); rerr != nil {
			j.log.WithError(rerr).Warn("journal: cannot remove the index of a segment that stays active")
		}
		return err
	}
	j.sealed = appendSealed(j.sealed, sealed{dir: j.dir, sum: x.sum})
	if err := a.file.Close(); err != nil {
		j.log.WithError(err).Warn("journal: closing the sealed segment failed")
	}
	j.active = next
	j.publish()
	j.stats.seals.Add(1)
	if j.crash(stepSealSyncDir) {
		return errSimulatedCrash
	}
	if err := j.opts.fs.SyncDir(j.dir); err != nil {
		j.untrusted = true // the new segment's entry may not be durable: rewritten at the next Commit
		j.log.WithError(err).Warn("journal: directory sync after sealing a segment failed")
	}
	return nil
}

// appendSealed returns a NEW slice: readers may hold the old one.
func appendSealed(s []sealed, seg sealed) []sealed {
	out := make([]sealed, len(s), len(s)+1)
	copy(out, s)
	return append(out, seg)
}

// indexActive builds the index of the active segment from memory.
func (j *Journal) indexActive() *indexer {
	a := j.active
	x := newIndexer(a.base)
	starts := map[uint64]bool{}
	for _, e := range j.clock.epochs {
		starts[e.firstSeq] = true
	}
	for i, ev := range a.evs {
		end := a.end
		if i+1 < len(a.offs) {
			end = a.offs[i+1]
		}
		x.add(ev, a.offs[i], end-a.offs[i], starts[ev.Seq])
	}
	return x
}

// writeIndex writes x as the segment's index: temp, fsync, rename.
func (j *Journal) writeIndex(x *indexer) error {
	data, err := x.encode()
	if err != nil {
		return err
	}
	tmp, err := j.opts.fs.CreateTemp(j.dir, tempPrefix+"*")
	if err != nil {
		return fmt.Errorf("create index temp file: %w", err)
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if err != nil {
		return j.abandonTemp(tmp, fmt.Errorf("write %s: %w", tmp.Name(), err))
	}
	if err := tmp.Close(); err != nil {
		return j.abandonTemp(tmp, err)
	}
	dst := filepath.Join(j.dir, segName(x.sum.Base, segIdx))
	if err := j.opts.fs.Rename(tmp.Name(), dst); err != nil {
		return j.abandonTemp(tmp, fmt.Errorf("rename index into place: %w", err))
	}
	return nil
}

// createSegment creates the empty segment starting at base.
func (j *Journal) createSegment(base uint64) (*activeSeg, error) {
	path := filepath.Join(j.dir, segName(base, segLog))
	f, err := j.opts.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create journal segment: %w", err)
	}
	return &activeSeg{base: base, path: path, file: f}, nil
}

// retain removes the sealed segments whose every event is older than the
// last RetainCount: whole files, oldest first, O(1) each, never a rewrite of
// a retained event. Readers still serve at most RetainCount (see floor).
func (j *Journal) retain() {
	r := uint64(j.opts.RetainCount)
	if r == 0 || j.halted() != nil {
		return
	}
	removed := 0
	for removed < len(j.sealed) && j.sealed[removed].sum.LastSeq+r <= j.committed.seq &&
		(!j.holdRetention || j.sealed[removed].sum.LastSeq <= j.keepAfter) {
		if err := j.removeSegment(j.sealed[removed]); err != nil {
			if !errors.Is(err, errSimulatedCrash) {
				j.log.WithError(err).Warn("journal: cannot remove an old segment; retrying later")
			}
			break
		}
		removed++
	}
	if removed == 0 {
		return
	}
	j.sealed = append([]sealed(nil), j.sealed[removed:]...)
	first := j.active.base
	if len(j.sealed) > 0 {
		first = j.sealed[0].sum.FirstSeq
	}
	j.clock.epochs = pruneEpochs(j.clock.epochs, first)
	j.committed.epochs = pruneEpochs(j.committed.epochs, first)
	j.stats.removedSegments.Add(uint64(removed))
	j.publish()
}

// HoldRetention keeps every event after seq, whatever the retain count:
// retention removes only segments whose events are all at or below it. A
// reader that checkpoints what it built from the events (and replays the
// events after its checkpoint at start) calls it after each checkpoint it
// wrote. Called by the writer only, as Append.
func (j *Journal) HoldRetention(seq uint64) {
	j.holdRetention, j.keepAfter = true, seq
}

// removeSegment removes the log first: an index left alone by a crash is
// recognised as such and removed at the next Open.
func (j *Journal) removeSegment(s sealed) error {
	if j.crash(stepRemoveLog) {
		return errSimulatedCrash
	}
	if err := j.opts.fs.Remove(s.logPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if j.crash(stepRemoveIdx) {
		return errSimulatedCrash
	}
	if err := j.opts.fs.Remove(s.idxPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		j.log.WithError(err).Warn("journal: cannot remove the index of a removed segment")
	}
	return nil
}

// removeStaleTemps deletes temp files a crash left behind. They are never a
// segment itself (only a complete, synced one is renamed into place).
func (j *Journal) removeStaleTemps() {
	entries, err := os.ReadDir(j.dir)
	if err != nil {
		return // Open reports a real problem with the directory
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), tempPrefix) && !strings.HasPrefix(e.Name(), "."+idFile+"-") {
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
