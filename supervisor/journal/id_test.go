package journal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The id survives restarts and compaction, and is new whenever the events
// it stood for are gone or it is unreadable.
func TestJournalIdentity(t *testing.T) {
	path := journalPath(t)
	dir := filepath.Dir(path)
	j := mustOpen(t, path, Options{RetainCount: 5, segmentRecords: 8})
	id := j.ID()
	if len(id) != 32 {
		t.Fatalf("id %q", id)
	}
	appendN(t, j, 200) // segments sealed and removed
	if j.Stats().RemovedSegments == 0 || j.ID() != id {
		t.Fatalf("after retention: id %q (was %q), %+v", j.ID(), id, j.Stats())
	}
	mustClose(t, j)
	j = mustOpen(t, path, Options{})
	if j.ID() != id {
		t.Fatalf("reopened id %q, want %q", j.ID(), id)
	}
	mustClose(t, j)
	if other := mustOpen(t, journalPath(t), Options{}); other.ID() == id {
		t.Fatal("two journals share an id")
	}

	removeSegments(t, dir)
	j = mustOpen(t, path, Options{})
	recreated := j.ID()
	if recreated == id || j.Len() != 0 {
		t.Fatalf("journal recreated after events.log was lost kept id %q", id)
	}
	mustClose(t, j)
	writeFile(t, filepath.Join(dir, idFile), []byte("not an id\n"))
	j = mustOpen(t, path, Options{})
	defer mustClose(t, j)
	if j.ID() == recreated || len(j.ID()) != 32 || readID(dir) != j.ID() {
		t.Fatalf("damaged id file: id %q, file %q", j.ID(), readID(dir))
	}
}

// If a new journal's id cannot be written, the id file of a lost journal is
// removed (it must never pass for this one's) and nothing is committed until
// the id is on disk.
func TestIDWrittenBeforeFirstCommit(t *testing.T) {
	path := journalPath(t)
	dir := filepath.Dir(path)
	writeFile(t, filepath.Join(dir, idFile), []byte("0123456789abcdef0123456789abcdef\n"))
	fs := newFaultFS()
	fs.set("create", syscall.ENOSPC)
	j := mustOpen(t, path, Options{fs: fs})
	defer mustClose(t, j)
	if _, err := os.Stat(filepath.Join(dir, idFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale id file kept: %v", err)
	}
	if _, err := j.AppendBatch(batchOf("c", 1)); !errors.Is(err, syscall.ENOSPC) || j.Len() != 0 {
		t.Fatalf("commit without a durable id: %v", err)
	}
	fs.clear("create")
	if _, err := j.AppendBatch(batchOf("c", 1)); err != nil {
		t.Fatal(err)
	}
	if readID(dir) != j.ID() {
		t.Fatalf("id file %q, journal id %q", readID(dir), j.ID())
	}
}

// A v0.2 events.log elsewhere is imported into a new journal once, and left
// as it was.
func TestLegacyImport(t *testing.T) {
	evs, data, _ := buildJournal(t, 5)
	legacy := filepath.Join(t.TempDir(), "events.log")
	writeFile(t, legacy, data)
	path := journalPath(t)
	j := mustOpen(t, path, Options{Legacy: legacy})
	assertEvents(t, list(t, j.After(0, "")), evs)
	next := mustAppend(t, j, Event{Type: TypeOOM, ID: "z"})
	mustClose(t, j)
	if got, _ := os.ReadFile(legacy); !bytes.Equal(got, data) {
		t.Fatal("the imported file was changed")
	}
	writeFile(t, legacy, nil) // not read again
	j = mustOpen(t, path, Options{Legacy: legacy})
	defer mustClose(t, j)
	assertEvents(t, list(t, j.After(0, "")), append(evs, next))
}

// A record whose seq is not above the previous one (a duplicated line, a
// damaged record) is skipped with a warning, never renumbered, and the
// records after it keep their seqs.
func TestLoadSkipsRecordsOutOfOrder(t *testing.T) {
	evs, data, ends := buildJournal(t, 4)
	line := func(i int) []byte { return recordAt(data, ends, i) }
	path := journalPath(t)
	writeFile(t, path, bytes.Join([][]byte{line(0), line(1), line(1), line(0), line(2), line(3)}, nil))
	log, hook := quietLogger()
	j := mustOpen(t, path, Options{Logger: log})
	defer mustClose(t, j)
	assertEvents(t, list(t, j.After(0, "")), evs)
	if s := j.Stats(); s.OutOfOrder != 2 || s.Loaded != 4 {
		t.Fatalf("stats %+v", s)
	}
	warned := 0
	for _, e := range hook.AllEntries() {
		if e.Data["previous_seq"] == uint64(2) {
			warned++
		}
	}
	if warned != 2 {
		t.Fatalf("%d warnings naming the previous seq, want 2", warned)
	}
	if next := mustAppend(t, j, Event{Type: TypeOOM, ID: "z"}); next.Seq != 5 {
		t.Fatalf("next seq %d", next.Seq)
	}
}

func removeSegments(t *testing.T, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if _, _, ok := parseSegName(e.Name()); ok {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
}
