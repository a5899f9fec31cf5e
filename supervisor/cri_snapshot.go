package supervisor

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/evjournal/containerd/internal/atomicfile"
	"github.com/evjournal/containerd/supervisor/journal"
	"github.com/evjournal/containerd/supervisor/objects"
)

// The objects table is checkpointed in <ObjectsDir>/cri-objects.json, off
// the loop: after a batch that changed it, the loop encodes the table with
// the journal's last seq and hands the bytes to the snapshot writer, which
// writes them atomically and then lets the journal's retention drop the
// events at or below that seq (HoldRetention). A start loads the snapshot
// and replays the journal after its seq (loadObjects). The snapshot is
// never ahead of the journal: none is taken while events are held.

// snapshotRetry is the pause after a snapshot that could not be written (a
// full disk): the next one is tried no sooner.
const snapshotRetry = time.Second

type snapshotJob struct {
	data []byte
	seq  uint64
}

// snapshotWriter writes the latest snapshot it was offered; older ones
// that were not written yet are dropped.
type snapshotWriter struct {
	path string
	mu   sync.Mutex
	next *snapshotJob // guarded by mu
	wake chan struct{}
	stop chan struct{}
	done chan struct{}
	// offered is the seq of the last snapshot offered; owned by the loop.
	offered uint64
}

// snapshotEvery: a table that did not change is snapshotted again once the
// journal moved this far, so that an old snapshot does not hold the
// journal's retention back for ever.
const snapshotEvery = journal.DefaultSegmentRecords

func newSnapshotWriter(path string) *snapshotWriter {
	return &snapshotWriter{path: path, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

func (w *snapshotWriter) offer(j snapshotJob) {
	w.mu.Lock()
	w.next = &j
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *snapshotWriter) take() *snapshotJob {
	w.mu.Lock()
	defer w.mu.Unlock()
	j := w.next
	w.next = nil
	return j
}

// run writes offered snapshots until close; written reports each one.
func (w *snapshotWriter) run(written func(seq uint64, err error)) {
	defer close(w.done)
	for {
		select {
		case <-w.stop:
			if j := w.take(); j != nil {
				written(j.seq, atomicfile.Write(w.path, j.data, 0o600))
			}
			return
		case <-w.wake:
		}
		j := w.take()
		if j == nil {
			continue
		}
		err := atomicfile.Write(w.path, j.data, 0o600)
		written(j.seq, err)
		if err != nil {
			select {
			case <-w.stop:
			case <-time.After(snapshotRetry):
			}
		}
	}
}

func (w *snapshotWriter) close() {
	close(w.stop)
	<-w.done
}

// maybeSnapshot offers a snapshot of the objects when they changed (or the
// journal moved snapshotEvery events since the last one) and the journal
// holds everything they reflect. Called on the loop after a flush.
func (s *Supervisor) maybeSnapshot() {
	if s.degraded != nil || len(s.outbox) > 0 || s.snapshots == nil {
		return
	}
	seq, _ := s.journal.Last()
	if !s.objects.Dirty() && seq < s.snapshots.offered+snapshotEvery {
		return
	}
	data, err := s.objects.Snapshot(s.journal.ID(), seq)
	if err != nil {
		s.log.WithError(err).Error("cri objects: cannot encode the snapshot")
		return
	}
	s.objects.MarkClean()
	s.snapshots.offered = seq
	s.snapshots.offer(snapshotJob{data: data, seq: seq})
}

// snapshotWritten runs on the writer: a written snapshot lets retention go
// up to its seq; a failed one leaves the table dirty, to be tried again.
func (s *Supervisor) snapshotWritten(seq uint64, err error) {
	if err != nil {
		s.log.WithError(err).Warn("cri objects: cannot write the snapshot; the journal keeps the events since the last one, retrying")
		s.send(func(s *Supervisor) { s.objects.MarkDirty() })
		return
	}
	s.send(func(s *Supervisor) { s.journal.HoldRetention(seq) })
}

// loadObjects rebuilds the objects table before the restore: the snapshot,
// then the journal's events after it. A damaged snapshot is set aside and
// the whole journal replayed. Without a snapshot, the whole journal is
// replayed only where the CRI service has records beside it (the snapshot
// was lost): on a daemon that never ran pods (a 0.2 node starting on a
// journal of millions of events) there is nothing to find, and the first
// start is not slowed. An empty snapshot is written at once then, so that
// from now on there always is one.
func (s *Supervisor) loadObjects() {
	path := filepath.Join(s.cfg.ObjectsDir, objects.SnapshotFile)
	from, table, found := s.readSnapshot(path)
	s.objects = table
	if !found && !s.criRecordsBeside() {
		from, _ = s.journal.Last()
		s.writeFirstSnapshot(path, from)
	}
	n := s.replayObjects(from)
	s.journal.HoldRetention(from)
	s.objects.MarkDirty() // written at the end of the start, so the next start reads little
	s.log.WithField("objects", s.objects.Len()).WithField("replayed", n).WithField("snapshot_seq", from).Info("cri objects loaded")
}

// replayObjects applies the retained events after seq; it returns how many.
func (s *Supervisor) replayObjects(seq uint64) int {
	r := s.journal.AfterRetained(seq)
	defer r.Close()
	n := 0
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return n
		}
		if err != nil {
			s.log.WithError(err).Error("cri objects: replaying the journal failed; objects may lag behind it until reconciled")
			return n
		}
		s.objects.Apply(ev)
		n++
	}
}

// criRecordsBeside says whether the objects' dir, when it is not the
// journal's, holds anything but the snapshot (the CRI service's records).
func (s *Supervisor) criRecordsBeside() bool {
	if s.cfg.ObjectsDir == s.cfg.JournalDir {
		return false
	}
	entries, err := os.ReadDir(s.cfg.ObjectsDir)
	if err != nil {
		return true // unknown: the safe side is the replay
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), objects.SnapshotFile) {
			return true
		}
	}
	return false
}

func (s *Supervisor) writeFirstSnapshot(path string, seq uint64) {
	data, err := s.objects.Snapshot(s.journal.ID(), seq)
	if err == nil {
		err = atomicfile.Write(path, data, 0o600)
	}
	if err != nil {
		s.log.WithError(err).Warn("cri objects: cannot write the first snapshot; written again once the loop runs")
	}
}

// readSnapshot returns the table of the snapshot at path and the seq to
// replay from: 0 (everything) for a snapshot of another journal or a
// damaged one. found is false when there is no snapshot at all.
func (s *Supervisor) readSnapshot(path string) (uint64, *objects.Table, bool) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, objects.NewTable(), false
	}
	if err != nil {
		s.log.WithError(err).Error("cri objects: snapshot unreadable; replaying the whole journal")
		return 0, objects.NewTable(), true
	}
	l, err := objects.LoadSnapshot(data)
	if err != nil {
		aside := path + ".bad-" + time.Now().UTC().Format("20060102T150405")
		s.log.WithError(err).WithField("kept_as", aside).Error("cri objects: snapshot unreadable; set aside, replaying the whole journal")
		if rerr := os.Rename(path, aside); rerr != nil {
			s.log.WithError(rerr).Warn("cri objects: cannot set the bad snapshot aside")
		}
		return 0, objects.NewTable(), true
	}
	if l.Journal != s.journal.ID() {
		// The journal was replaced: what the snapshot knows still holds,
		// and the new journal is replayed whole on top of it.
		s.log.WithField("snapshot_journal", l.Journal).WithField("journal", s.journal.ID()).
			Warn("cri objects: the snapshot is of another journal; replaying this one whole on top of it")
		return 0, l.Table, true
	}
	return l.Seq, l.Table, true
}

// startSnapshots starts the writer (once the loop runs).
func (s *Supervisor) startSnapshots() {
	s.snapshots = newSnapshotWriter(filepath.Join(s.cfg.ObjectsDir, objects.SnapshotFile))
	go s.snapshots.run(s.snapshotWritten)
}
