package journal

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// fileName is the journal file inside the journal directory.
const fileName = "events.log"

// Options configures Open. The zero value is usable: unbounded, SyncBatch.
type Options struct {
	RetainCount int              // keep about the last N events; 0 = unbounded
	Sync        SyncPolicy       // zero value is SyncBatch
	Now         func() time.Time // the clock, default time.Now; tests pass a fake one
	Logger      *logrus.Entry    // default logrus.StandardLogger()
	// Legacy is the path of a v0.2 events.log to import when the journal
	// directory holds no journal yet. It is read, never changed.
	Legacy string

	fs fileSystem // default osFS; tests inject faults
	// crashAt, when it returns true for a step, makes a file replacement
	// stop right there as if the process died: no cleanup, no rollback.
	crashAt func(compactStep) bool
}

// Journal is the append-only event file plus the retained events in memory.
//
// One goroutine (the supervisor loop) calls Append, AppendBatch, Commit and
// Close; the read methods may be called from any goroutine at the same time.
type Journal struct {
	dir, path string
	id        string
	opts      Options
	log       *logrus.Entry
	stats     counters

	// Writer state: owned by the single writer, never read by readers.
	file        file
	size        int64   // end of the last committed record in file
	end         int64   // end of the last written record (uncommitted ones included)
	all         []Event // retained events, oldest first, uncommitted ones included
	pending     int     // trailing events of all appended since the last Commit
	dirty       bool    // data written since the last fsync
	untrusted   bool    // an fsync, directory sync or truncate failed: rewrite the file before committing
	idUnsaved   bool    // the id could not be written yet: retried before committing
	nextCompact int     // compact when len(all) goes above this
	clock       clockState
	committed   clockState // clock as of the last Commit, restored by a rollback
	closed      bool
	halted      error // set by a simulated crash (tests): every write fails with it

	mu        sync.RWMutex
	pub       []Event      // guarded by mu; what readers see. Never mutated in place once published.
	pubEpochs []epochStart // guarded by mu; the epochs of pub
}

// Open opens or creates the journal in dir and loads its events. A torn or
// garbage tail is cut off with a warning and garbage lines between valid ones
// are skipped: only failing to open or read the file is an error, so the
// daemon always starts. History is never emptied.
func Open(dir string, opts Options) (*Journal, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	path := filepath.Join(dir, fileName)
	j := &Journal{dir: dir, path: path, opts: opts, log: opts.Logger.WithField("file", path)}
	j.removeStaleTemps()
	_, statErr := os.Stat(path)
	created := errors.Is(statErr, os.ErrNotExist)
	if err := j.establishID(created); err != nil {
		return nil, err
	}
	f, err := opts.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	j.file = f
	if created {
		j.syncNewEntry()
	}
	j.fixMode()
	if err := j.loadAll(created); err != nil {
		f.Close()
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
	return nil
}

// establishID reads the journal's id, or makes a new one when the journal
// is new (its events file missing) or has none yet (a v0.2 file). The new id
// is persisted before the events file is created. If it cannot be, the id
// file left by a lost journal is removed (it must never be taken for this
// one's) and writing is retried before the first Commit.
func (j *Journal) establishID(created bool) error {
	if !created {
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

// syncNewEntry makes a just created file's directory entry durable: without
// it, events fsynced into the file could vanish with the entry on power loss.
// On failure the file is rewritten (temp, fsync, rename, directory fsync)
// before the first Commit.
func (j *Journal) syncNewEntry() {
	if err := j.opts.fs.SyncDir(j.dir); err != nil {
		j.untrusted = true
		j.log.WithError(err).Warn("journal: cannot sync the directory of the new journal")
	}
}

// fixMode tightens a journal inherited from v0.2.9, which created it 0755.
func (j *Journal) fixMode() {
	fi, err := j.file.Stat()
	if err != nil || fi.Mode().Perm() == 0o600 {
		return
	}
	if err := j.file.Chmod(0o600); err != nil {
		j.log.WithError(err).Warn("journal: cannot set file mode to 0600")
	}
}

// settle finishes Open: a file that must be rewritten (an import, a failed
// directory sync) or that is longer than the threshold is rewritten now,
// crash-safely; a failure is logged and retried later.
func (j *Journal) settle() {
	if j.untrusted || j.idUnsaved {
		if err := j.Commit(); err != nil {
			j.log.WithError(err).Warn("journal: cannot rewrite the journal yet; retrying at the next commit")
		}
		return
	}
	j.maybeCompact()
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
	start := time.Now()
	ev, newEpoch, err := j.stamp(ev)
	if err != nil {
		return Event{}, err
	}
	line, err := appendRecord(nil, ev)
	if err != nil {
		return Event{}, err
	}
	if err := j.writeRecord(line); err != nil {
		return Event{}, err
	}
	j.all = append(j.all, ev)
	j.pending++
	j.clock.advance(ev, newEpoch)
	j.stats.appended.Add(1)
	j.stats.lastAppend.Store(int64(time.Since(start)))
	return ev, nil
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
	if errors.As(err, &we) || j.pending == 0 {
		return err
	}
	return errors.Join(err, j.rollback("abort", err))
}

func (j *Journal) writable() error {
	if j.closed {
		return ErrClosed
	}
	return j.halted
}

// stamp assigns what Append promises: Seq last+1 (never wrapping), the
// timestamp and epoch of clockState.next, and a status in 0..255 so the
// event in memory equals the one read back from disk.
func (j *Journal) stamp(ev Event) (Event, bool, error) {
	if j.clock.seq == math.MaxUint64 {
		return Event{}, false, fmt.Errorf("journal %s: last seq is %d: %w", j.path, j.clock.seq, ErrSeqExhausted)
	}
	ev.Seq = j.clock.seq + 1
	var newEpoch bool
	ev.Timestamp, ev.Epoch, newEpoch = j.clock.next(j.opts.Now())
	ev.Status = clampStatus(int64(ev.Status))
	return ev, newEpoch, nil
}

// writeRecord writes one complete line, synced under SyncAlways. A failed
// write or sync rolls back to the last Commit. While the file is untrusted
// nothing is written to it: the next Commit rewrites it from memory.
func (j *Journal) writeRecord(line []byte) error {
	if j.untrusted {
		return nil
	}
	if _, err := j.file.Write(line); err != nil {
		return j.rollback("write", err)
	}
	j.end += int64(len(line))
	j.dirty = true
	if j.opts.Sync == SyncAlways {
		if err := j.syncFile(); err != nil {
			j.untrusted = true // the kernel may have dropped the pages: see the package doc
			return j.rollback("sync", err)
		}
	}
	return nil
}

func (j *Journal) syncFile() error {
	start := time.Now()
	if err := j.file.Sync(); err != nil {
		return err
	}
	j.stats.syncs.Add(1)
	j.stats.lastSync.Store(int64(time.Since(start)))
	j.dirty = false
	return nil
}

// Commit makes every appended event durable per the policy and visible to
// readers: under SyncBatch one fsync if anything was written since the last
// one (group commit); under SyncAlways the records are already synced and
// under SyncNone nothing is synced. If the file is untrusted (an earlier
// fsync, directory sync or truncate failed) it is first rewritten from memory.
// On error nothing appended since the last Commit becomes visible: it is
// discarded and a *WriteError says why.
func (j *Journal) Commit() error {
	if err := j.writable(); err != nil {
		return err
	}
	if err := j.makeDurable(); err != nil {
		return err
	}
	j.size = j.end
	j.pending = 0
	j.committed = j.clock
	j.publish()
	j.maybeCompact()
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
		if err := j.rewrite(); err != nil {
			return j.rollback("rewrite", err)
		}
		return nil
	}
	if j.opts.Sync == SyncBatch && j.dirty {
		if err := j.syncFile(); err != nil {
			j.untrusted = true
			return j.rollback("sync", err)
		}
	}
	return nil
}

// rollback returns the journal to its last committed state: the events
// appended since are dropped from memory, the clock restored, the file cut
// back to the last committed record. If the cut fails the file is marked
// untrusted and the next Commit rewrites it from memory.
func (j *Journal) rollback(op string, cause error) error {
	discarded := j.pending
	j.all = j.all[:len(j.all)-j.pending]
	j.pending = 0
	j.clock = j.committed
	j.stats.writeErrors.Add(1)
	if !j.untrusted {
		if err := j.truncate(j.size); err != nil {
			j.untrusted = true
			j.log.WithError(err).Warn("journal: cannot cut the file back after a failed write; it will be rewritten")
		}
	}
	return &WriteError{File: j.path, Op: op, Discarded: discarded, Err: cause}
}

// truncate cuts the file at size and puts the offset there (a rewritten
// file is not O_APPEND).
func (j *Journal) truncate(size int64) error {
	if err := j.file.Truncate(size); err != nil {
		return err
	}
	if _, err := j.file.Seek(size, 0); err != nil {
		return err
	}
	j.end = size
	if j.opts.Sync == SyncBatch {
		j.dirty = false // what is left was committed, so synced
	}
	return nil
}

// publish exposes every committed event. The slice's capacity is capped so
// that a reader's append can never write into the writer's backing array.
func (j *Journal) publish() {
	n := len(j.all) - j.pending
	j.mu.Lock()
	j.pub = j.all[:n:n]
	j.pubEpochs = j.committed.epochs
	j.mu.Unlock()
}

// Close commits and closes the file. Reads keep working on what was loaded
// and committed; writes fail with ErrClosed. Closing twice is a no-op.
func (j *Journal) Close() error {
	if j.closed {
		return nil
	}
	err := j.Commit()
	j.closed = true
	if cerr := j.file.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close journal: %w", cerr))
	}
	return err
}
