package journal

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// Options configures Open. The zero value is usable: keep everything, SyncBatch.
type Options struct {
	RetainCount int              // serve at most the last N events; 0 = keep all
	Sync        SyncPolicy       // zero value is SyncBatch
	Now         func() time.Time // the clock, default time.Now; tests pass a fake one
	Logger      *logrus.Entry    // default logrus.StandardLogger()
	// Legacy is the path of a v0.2 events.log to import when the journal
	// directory holds no journal yet. It is read, never changed.
	Legacy string
	// HoldRetention: retention removes nothing until HoldRetention names
	// the seq that a checkpointing reader (the CRI objects' snapshot) needs
	// every event after; that reader reads its checkpoint after Open.
	HoldRetention bool

	segmentRecords int        // default DefaultSegmentRecords; small in tests
	fs             fileSystem // default osFS; tests inject faults
	failpoints     failpoints // empty unless built with -tags failpoints (tests)
}

// Journal is a directory of segment files plus, in memory, the events of
// the newest segment and a summary of each older one.
//
// One goroutine (the supervisor loop) calls Append, AppendBatch, Commit and
// Close; the read methods may be called from any goroutine at the same time.
type Journal struct {
	dir   string
	id    string
	opts  Options
	log   *logrus.Entry
	stats counters

	// Writer state: owned by the single writer, never read by readers.
	active      *activeSeg
	sealed      []sealed // oldest first; replaced, never changed in place
	untrusted   bool     // an fsync, directory sync or truncate failed: rewrite the active segment before committing
	scratch     []byte   // the line being encoded under SyncAlways or while untrusted, reused
	idUnsaved   bool     // the id could not be written yet: retried before committing
	sealErr     error    // why the last seal failed
	sealRetryAt int      // retry sealing once the active segment holds this many
	clock       clockState
	committed   clockState // clock as of the last Commit, restored by a rollback
	closed      bool
	// keepAfter, when holdRetention is set, is the newest seq retention may
	// drop: a reader that checkpoints its state (the CRI objects' snapshot)
	// still needs every event after it.
	keepAfter     uint64
	holdRetention bool

	mu   sync.RWMutex
	view view // guarded by mu: what readers see
}

// Open opens or creates the journal in dir and loads it: the summaries of
// the sealed segments and the events of the newest one, whatever the
// journal's length. A torn or garbage tail is cut off with a warning and
// garbage lines between valid ones are skipped: only failing to open or read
// the directory or the newest segment is an error, so the daemon starts.
// History is never emptied.
func Open(dir string, opts Options) (*Journal, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	j := &Journal{dir: dir, opts: opts, log: opts.Logger.WithField("journal", dir), holdRetention: opts.HoldRetention}
	j.removeStaleTemps()
	if err := j.load(); err != nil {
		if j.active != nil {
			j.active.file.Close()
		}
		return nil, err
	}
	j.settle()
	return j, nil
}

func (o *Options) fill() error {
	if o.RetainCount < 0 {
		return fmt.Errorf("retain count %d: %w", o.RetainCount, ErrInvalidArgument)
	}
	if !o.Sync.valid() {
		return fmt.Errorf("sync policy %v: %w", o.Sync, ErrInvalidArgument)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = logrus.NewEntry(logrus.StandardLogger())
	}
	if o.fs == nil {
		o.fs = osFS{}
	}
	if o.segmentRecords <= 0 {
		o.segmentRecords = DefaultSegmentRecords
	}
	return nil
}

// settle finishes Open: an active segment that must be rewritten (a failed
// directory sync or tail cut) or an id not yet on disk is dealt with now;
// a failure is logged and retried at the next Commit.
func (j *Journal) settle() {
	if j.untrusted || j.idUnsaved {
		if err := j.Commit(); err != nil {
			j.log.WithError(err).Warn("journal: cannot rewrite the newest segment yet; retrying at the next commit")
		}
	}
	j.retain()
}

// Append stores ev with the next Seq and a Timestamp strictly after the
// previous event's in its epoch, writes it as one line (fsynced under
// SyncAlways) and returns the stored event. It becomes visible to readers at
// the next successful Commit, under every policy, so that a replay never
// hands out an event the loop has not published yet.
//
// On a *WriteError every event appended since the last Commit is discarded
// (see the package doc). ErrSeqExhausted, ErrInvalidArgument and ErrClosed
// change nothing.
func (j *Journal) Append(ev Event) (Event, error) {
	if err := j.writable(); err != nil {
		return Event{}, err
	}
	if err := j.roomInActive(); err != nil {
		return Event{}, j.rollback("seal segment", err)
	}
	start := time.Now()
	ev, newEpoch, err := j.stamp(ev)
	if err != nil {
		return Event{}, err
	}
	n, err := j.writeRecord(ev)
	if err != nil {
		return Event{}, err
	}
	j.active.add(ev, n)
	j.clock.advance(ev, newEpoch)
	j.stats.appended.Add(1)
	j.stats.lastAppend.Store(int64(time.Since(start)))
	return ev, nil
}

// roomInActive bounds memory when sealing keeps failing (no inode for a new
// segment, say): past four segments' worth the journal refuses events
// rather than hold them all.
func (j *Journal) roomInActive() error {
	if j.sealErr == nil || len(j.active.evs) < 4*j.opts.segmentRecords {
		return nil
	}
	if j.active.pending == 0 {
		j.sealRetryAt = 0
		j.maybeSeal() // retried here too: no Commit comes while appends are refused
	}
	if j.sealErr != nil && len(j.active.evs) >= 4*j.opts.segmentRecords {
		return j.sealErr
	}
	return nil
}

// AppendBatch appends evs and commits them: on success all are durable per
// the policy and visible, on error none is (nor anything appended before it
// since the last Commit).
func (j *Journal) AppendBatch(evs []Event) ([]Event, error) {
	out := make([]Event, 0, len(evs))
	for _, ev := range evs {
		stored, err := j.Append(ev)
		if err != nil {
			return nil, j.abort(err)
		}
		out = append(out, stored)
	}
	if err := j.Commit(); err != nil {
		return nil, err
	}
	return out, nil
}

// abort discards the uncommitted events after an error that did not already
// do so (a WriteError did).
func (j *Journal) abort(err error) error {
	var we *WriteError
	if errors.As(err, &we) || j.active.pending == 0 {
		return err
	}
	return errors.Join(err, j.rollback("abort", err))
}

func (j *Journal) writable() error {
	if j.closed {
		return ErrClosed
	}
	return j.halted()
}

// stamp assigns what Append promises: Seq last+1 (never wrapping), the
// timestamp and epoch of clockState.next, and a status in 0..255 so the
// event in memory equals the one read back from disk.
func (j *Journal) stamp(ev Event) (Event, bool, error) {
	if j.clock.seq == math.MaxUint64 {
		return Event{}, false, fmt.Errorf("journal %s: last seq is %d: %w", j.dir, j.clock.seq, ErrSeqExhausted)
	}
	ev.Seq = j.clock.seq + 1
	var newEpoch bool
	ev.Timestamp, ev.Epoch, newEpoch = j.clock.next(j.opts.Now())
	ev.Status = clampStatus(int64(ev.Status))
	return ev, newEpoch, nil
}

// writeRecord encodes ev as one complete line and returns its length. Under
// SyncAlways the line is written and synced at once; under the other
// policies it joins the active segment's unwritten records, which Commit
// writes. A failed write or sync rolls back to the last Commit. While the
// segment is untrusted nothing is written to it: the next Commit rewrites it
// from memory.
func (j *Journal) writeRecord(ev Event) (int64, error) {
	a := j.active
	if !j.untrusted && j.opts.Sync != SyncAlways {
		k := len(a.unwritten)
		buf, err := appendRecord(a.unwritten, ev)
		if err != nil {
			a.unwritten = buf[:k]
			return 0, err
		}
		a.unwritten = buf
		a.end += int64(len(buf) - k)
		return int64(len(buf) - k), nil
	}
	line, err := appendRecord(j.scratch[:0], ev)
	if err != nil {
		return 0, err
	}
	j.scratch = line
	if j.untrusted {
		return int64(len(line)), nil
	}
	if _, err := a.file.Write(line); err != nil {
		return 0, j.rollback("write", err)
	}
	a.end += int64(len(line))
	a.dirty = true
	if err := j.syncActive(); err != nil {
		j.untrusted = true // the kernel may have dropped the pages: see the package doc
		return 0, j.rollback("sync", err)
	}
	return int64(len(line)), nil
}

// writeUnwritten writes the records Append held for Commit, in one write.
func (j *Journal) writeUnwritten() error {
	a := j.active
	if len(a.unwritten) == 0 {
		return nil
	}
	if _, err := a.file.Write(a.unwritten); err != nil {
		return err
	}
	a.unwritten = a.unwritten[:0]
	a.dirty = true
	return nil
}

func (j *Journal) syncActive() error {
	start := time.Now()
	if err := j.active.file.Sync(); err != nil {
		return err
	}
	j.stats.syncs.Add(1)
	j.stats.lastSync.Store(int64(time.Since(start)))
	j.active.dirty = false
	return nil
}

// Commit makes every appended event durable per the policy and visible to
// readers: under SyncBatch one fsync if anything was written since the last
// one (group commit); under SyncAlways the records are already synced and
// under SyncNone nothing is synced. If the newest segment is untrusted (an
// earlier fsync, directory sync or truncate failed) it is first rewritten
// from memory. On error nothing appended since the last Commit becomes
// visible: it is discarded and a *WriteError says why. A full segment is
// then sealed and segments past the retain count removed.
func (j *Journal) Commit() error {
	if err := j.writable(); err != nil {
		return err
	}
	if err := j.makeDurable(); err != nil {
		return err
	}
	j.active.commit()
	j.committed = j.clock
	j.publish()
	j.maybeSeal()
	return nil
}

func (j *Journal) makeDurable() error {
	if j.idUnsaved {
		if err := j.writeID(j.id); err != nil {
			return j.rollback("write id", err)
		}
		j.idUnsaved = false
	}
	if j.untrusted {
		if err := j.rewriteActive(); err != nil {
			return j.rollback("rewrite", err)
		}
		return nil
	}
	if err := j.writeUnwritten(); err != nil {
		return j.rollback("write", err)
	}
	if j.opts.Sync == SyncBatch && j.active.dirty {
		if err := j.syncActive(); err != nil {
			j.untrusted = true
			return j.rollback("sync", err)
		}
	}
	return nil
}

// rollback returns the journal to its last committed state: the events
// appended since are dropped from memory, the clock restored, the segment
// cut back to the last committed record. If the cut fails the segment is
// marked untrusted and the next Commit rewrites it from memory.
func (j *Journal) rollback(op string, cause error) error {
	discarded := j.active.discard()
	j.clock = j.committed
	j.stats.writeErrors.Add(1)
	// Cut even an untrusted segment: a crash before it is rewritten then
	// leaves no discarded event on disk.
	if err := j.active.truncate(j.opts.Sync); err != nil {
		j.untrusted = true
		j.log.WithError(err).Warn("journal: cannot cut the segment back after a failed write; it will be rewritten")
	}
	return &WriteError{File: j.active.path, Op: op, Discarded: discarded, Err: cause}
}

// Close commits and closes the file. Reads keep working on what was loaded
// and committed; writes fail with ErrClosed. Closing twice is a no-op.
func (j *Journal) Close() error {
	if j.closed {
		return nil
	}
	err := j.Commit()
	j.closed = true
	if cerr := j.active.file.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close journal: %w", cerr))
	}
	return err
}
