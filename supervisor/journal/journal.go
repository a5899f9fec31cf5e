package journal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

var (
	// ErrClosed is returned by writes after Close.
	ErrClosed = errors.New("journal closed")
	// ErrInvalidArgument marks bad options or an event that cannot be stored.
	ErrInvalidArgument = errors.New("invalid argument")
)

// Options configures Open. The zero value is usable: unbounded, SyncBatch.
type Options struct {
	RetainCount int              // keep about the last N events; 0 = unbounded
	Sync        SyncPolicy       // zero value is SyncBatch
	Now         func() time.Time // clock, default time.Now
	Logger      *logrus.Entry    // default logrus.StandardLogger()

	// crashAt, when it returns true for a step, makes compaction stop right
	// there as if the process died: no cleanup, no rollback. Tests only.
	crashAt func(compactStep) bool
}

// Journal is the append-only event file plus the retained events in memory.
//
// One goroutine (the supervisor loop) calls Append, Commit and Close; the
// read methods may be called from any goroutine at the same time.
type Journal struct {
	path  string
	opts  Options
	log   *logrus.Entry
	stats counters

	// Writer state: owned by the single writer, never read by readers.
	file           *os.File
	size           int64   // end of the last complete record in file
	all            []Event // retained events, oldest first, uncommitted ones included
	pending        int     // trailing events of all not yet visible (SyncBatch before Commit)
	dirty          bool    // data written since the last fsync
	dirSyncPending bool    // a rename whose directory fsync failed; retried on Commit
	nextCompact    int     // compact when len(all) goes above this
	lastSeq        uint64
	lastTS         time.Time
	closed         bool
	broken         error // set when the file state is unknown; every write fails with it

	mu  sync.RWMutex
	pub []Event // guarded by mu; what readers see. Never mutated in place once published.
}

// Open opens or creates the journal at path and loads its events. A torn or
// garbage tail is cut off with a warning and garbage lines between valid ones
// are skipped: only failing to open or read the file is an error, so the
// daemon always starts. History is never emptied.
func Open(path string, opts Options) (*Journal, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	j := &Journal{path: path, opts: opts, log: opts.Logger.WithField("file", path)}
	j.removeStaleTemps()
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	j.file = f
	if errors.Is(statErr, os.ErrNotExist) {
		j.syncNewEntry()
	}
	j.fixMode()
	if err := j.load(); err != nil {
		f.Close()
		return nil, err
	}
	// A file longer than the threshold is compacted now, crash-safely; a
	// failure is logged and the daemon starts on the uncompacted file.
	j.maybeCompact()
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
	return nil
}

// syncNewEntry makes a just created file's directory entry durable: without
// it, events fsynced into the file could vanish with the entry on power loss.
// A failure is retried at the next Commit.
func (j *Journal) syncNewEntry() {
	if err := syncDir(filepath.Dir(j.path)); err != nil {
		j.dirSyncPending = true
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

// Append stores ev with the next Seq and a Timestamp strictly after the
// previous event's, writes it as one line (fsynced under SyncAlways) and
// returns the stored event. On error nothing is stored and the file is
// rolled back to its previous end. Readers see the event at once under
// SyncAlways and SyncNone, after the next Commit under SyncBatch, so that
// nothing can be replayed before it is durable.
func (j *Journal) Append(ev Event) (Event, error) {
	if err := j.writable(); err != nil {
		return Event{}, err
	}
	start := time.Now()
	ev = j.stamp(ev)
	line, err := appendRecord(nil, ev)
	if err != nil {
		return Event{}, err
	}
	if err := j.writeRecord(line); err != nil {
		return Event{}, err
	}
	j.accept(ev)
	j.stats.appended.Add(1)
	j.stats.lastAppend.Store(int64(time.Since(start)))
	j.maybeCompact()
	return ev, nil
}

func (j *Journal) writable() error {
	if j.closed {
		return ErrClosed
	}
	return j.broken
}

// stamp assigns what Append promises: Seq last+1, Timestamp max(now, last+1ns)
// so that "strictly after T" never skips an event sharing T, and a status in
// 0..255 so the event in memory equals the one read back from disk.
func (j *Journal) stamp(ev Event) Event {
	ev.Seq = j.lastSeq + 1
	ev.Timestamp = nextTimestamp(j.opts.Now(), j.lastTS)
	ev.Status = clampStatus(int64(ev.Status))
	return ev
}

// nextTimestamp drops the monotonic reading (it would not survive the file
// and would make in-memory comparisons differ from reloaded ones) and stores
// UTC so that the event read back is identical.
func nextTimestamp(now, last time.Time) time.Time {
	now = now.Round(0).UTC()
	if !now.After(last) {
		return last.Add(time.Nanosecond).UTC()
	}
	return now
}

// writeRecord writes one complete line, synced under SyncAlways. A failed
// write or sync is rolled back so that a later record never lands after a
// torn one.
func (j *Journal) writeRecord(line []byte) error {
	if _, err := j.file.Write(line); err != nil {
		return j.rollback(fmt.Errorf("write journal: %w", err))
	}
	if j.opts.Sync == SyncAlways {
		if err := j.syncFile(); err != nil {
			return j.rollback(err)
		}
	} else {
		j.dirty = true
	}
	j.size += int64(len(line))
	return nil
}

func (j *Journal) rollback(cause error) error {
	if err := j.file.Truncate(j.size); err != nil {
		j.broken = fmt.Errorf("journal unusable after failed rollback (%w): %w", cause, err)
		return j.broken
	}
	// The compacted file is not O_APPEND: put the offset back as well.
	if _, err := j.file.Seek(j.size, io.SeekStart); err != nil {
		j.broken = fmt.Errorf("journal unusable after failed rollback (%w): %w", cause, err)
		return j.broken
	}
	return cause
}

func (j *Journal) syncFile() error {
	start := time.Now()
	if err := j.file.Sync(); err != nil {
		return fmt.Errorf("sync journal: %w", err)
	}
	j.stats.syncs.Add(1)
	j.stats.lastSync.Store(int64(time.Since(start)))
	j.dirty = false
	return nil
}

// accept adds a written event to memory and, unless it waits for Commit,
// makes it visible to readers.
func (j *Journal) accept(ev Event) {
	j.all = append(j.all, ev)
	j.lastSeq, j.lastTS = ev.Seq, ev.Timestamp
	if j.opts.Sync == SyncBatch {
		j.pending++
		return
	}
	j.publish()
}

// publish exposes every committed event. The slice's capacity is capped so
// that a reader's append can never write into the writer's backing array.
func (j *Journal) publish() {
	n := len(j.all) - j.pending
	j.mu.Lock()
	j.pub = j.all[:n:n]
	j.mu.Unlock()
}

// Commit makes every appended event durable per the policy and visible to
// readers: under SyncBatch one fsync if anything was appended since the last
// Commit (group commit); under SyncAlways and SyncNone there is nothing to do.
// It also retries a directory fsync that failed after a compaction.
func (j *Journal) Commit() error {
	if err := j.writable(); err != nil {
		return err
	}
	if j.opts.Sync == SyncBatch && j.dirty {
		if err := j.syncFile(); err != nil {
			return err
		}
	}
	if err := j.retryDirSync(); err != nil {
		return err
	}
	if j.pending > 0 {
		j.pending = 0
		j.publish()
	}
	return nil
}

// Close commits and closes the file. Reads keep working on what was loaded
// and appended; writes fail with ErrClosed. Closing twice is a no-op.
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
