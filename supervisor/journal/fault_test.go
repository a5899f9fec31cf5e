package journal

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
)

// batchOf returns n distinct events for container id.
func batchOf(id string, n int) []Event {
	evs := make([]Event, n)
	for i := range evs {
		evs[i] = Event{Type: TypeExit, ID: id, Pid: string(rune('a' + i)), Status: uint32(i)}
	}
	return evs
}

// appendBatch appends evs and commits, as the loop does for one batch, and
// returns the first error.
func appendBatch(j *Journal, evs []Event) ([]Event, error) {
	var out []Event
	for _, ev := range evs {
		stored, err := j.Append(ev)
		if err != nil {
			return nil, err
		}
		out = append(out, stored)
	}
	return out, j.Commit()
}

// A write, an fsync or a truncate that fails leaves the journal at its last
// committed state, with an error wrapping the errno and naming the file, and
// usable: the same batch appended again once the fault is gone gets the same
// seqs and is the only thing on disk after it.
func TestWriteFaultsRollBackAndRecover(t *testing.T) {
	faults := []struct {
		name     string
		ops      []string
		errno    syscall.Errno
		rewrites bool // the file is no longer trusted: rewritten from memory
	}{
		{"disk full", []string{"write"}, syscall.ENOSPC, false},
		{"quota", []string{"write"}, syscall.EDQUOT, false},
		{"read-only", []string{"write"}, syscall.EROFS, false},
		{"io error on fsync", []string{"sync"}, syscall.EIO, true},
		{"disk full on fsync", []string{"sync"}, syscall.ENOSPC, true},
		{"write and truncate fail", []string{"write", "truncate"}, syscall.EIO, true},
	}
	for _, policy := range []SyncPolicy{SyncBatch, SyncAlways, SyncNone} {
		for _, f := range faults {
			if f.ops[0] == "sync" && policy == SyncNone {
				continue // never fsyncs
			}
			t.Run(policy.String()+"/"+f.name, func(t *testing.T) {
				checkWriteFault(t, policy, f.ops, f.errno, f.rewrites)
			})
		}
	}
}

func checkWriteFault(t *testing.T, policy SyncPolicy, ops []string, errno syscall.Errno, rewrites bool) {
	path := journalPath(t)
	fs := newFaultFS()
	j := mustOpen(t, path, Options{Sync: policy, fs: fs})
	before := appendN(t, j, 3)
	for _, op := range ops {
		fs.set(op, errno)
	}
	batch := batchOf("full", 2)
	_, err := appendBatch(j, batch)
	assertWriteError(t, err, errno, j.active.path)
	assertEvents(t, list(t, j.After(0, "")), before)
	if seq, _ := j.Last(); seq != 3 {
		t.Fatalf("Last after a failed batch = %d, want 3", seq)
	}
	for _, op := range ops {
		fs.clear(op)
	}
	retried, err := appendBatch(j, batch)
	if err != nil {
		t.Fatalf("retry after the fault is gone: %v", err)
	}
	if retried[0].Seq != 4 || retried[1].Seq != 5 {
		t.Fatalf("retried seqs %d %d, want 4 5", retried[0].Seq, retried[1].Seq)
	}
	if got := j.Stats().Rewrites; (got > 0) != rewrites {
		t.Fatalf("Rewrites = %d, want rewrite %v", got, rewrites)
	}
	mustClose(t, j)
	assertCleanFile(t, path)
	j = mustOpen(t, path, Options{})
	defer mustClose(t, j)
	assertEvents(t, list(t, j.After(0, "")), append(before, retried...))
}

func assertWriteError(t *testing.T, err error, errno syscall.Errno, path string) {
	t.Helper()
	var we *WriteError
	if !errors.As(err, &we) || !errors.Is(err, errno) {
		t.Fatalf("error %v (%T): want a *WriteError wrapping %v", err, err, errno)
	}
	if !strings.Contains(err.Error(), path) {
		t.Fatalf("error %q does not name the journal file %s", err, path)
	}
}

// After a failed fsync nothing new becomes visible until the retained events
// are rewritten to a new file and that file is durable: while the rewrite
// itself fails (no room for a temp file, a failing rename or directory sync)
// every Commit fails and readers see only what was committed before.
func TestFsyncErrorRewritesBeforeVisible(t *testing.T) {
	for _, rewriteFault := range []string{"create", "sync", "rename", "syncdir"} {
		t.Run(rewriteFault, func(t *testing.T) {
			path := journalPath(t)
			fs := newFaultFS()
			j := mustOpen(t, path, Options{fs: fs})
			before := appendN(t, j, 3)
			fs.set("sync", syscall.EIO)
			if _, err := appendBatch(j, batchOf("x", 1)); !errors.Is(err, syscall.EIO) {
				t.Fatalf("commit with a failing fsync: %v", err)
			}
			fs.clear("sync")
			fs.set(rewriteFault, syscall.ENOSPC)
			for range 3 {
				if _, err := appendBatch(j, batchOf("x", 2)); !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("commit while the rewrite fails: %v", err)
				}
				assertEvents(t, list(t, j.After(0, "")), before)
			}
			fs.clear(rewriteFault)
			after, err := appendBatch(j, batchOf("x", 2))
			if err != nil {
				t.Fatal(err)
			}
			if j.Stats().Rewrites != 1 {
				t.Fatalf("Rewrites = %d: the untrusted file was not rewritten", j.Stats().Rewrites)
			}
			assertEvents(t, list(t, j.After(0, "")), append(before, after...))
			mustClose(t, j)
			j = mustOpen(t, path, Options{})
			defer mustClose(t, j)
			assertEvents(t, list(t, j.After(0, "")), append(before, after...))
			assertNoTemps(t, path)
		})
	}
}

// A directory fsync that fails after a seal created the next segment is
// not retried and trusted: the next Commit rewrites the new segment from
// memory, and until that succeeds nothing new becomes visible.
func TestDirSyncFailureAfterSeal(t *testing.T) {
	path := journalPath(t)
	fs := newFaultFS()
	j := mustOpen(t, path, Options{RetainCount: 10, segmentRecords: 4, fs: fs})
	fs.set("syncdir", syscall.EIO)
	var all []Event
	for j.Stats().Seals == 0 {
		all = append(all, appendN(t, j, 1)...)
	}
	visible := list(t, j.After(0, ""))
	if _, err := appendBatch(j, batchOf("y", 1)); !errors.Is(err, syscall.EIO) {
		t.Fatalf("commit after the failed directory sync: %v", err)
	}
	assertEvents(t, list(t, j.After(0, "")), visible)
	fs.clear("syncdir")
	more, err := appendBatch(j, batchOf("y", 1))
	if err != nil {
		t.Fatal(err)
	}
	all = append(all, more...)
	mustClose(t, j)
	j = mustOpen(t, path, Options{RetainCount: 10, segmentRecords: 4})
	defer mustClose(t, j)
	assertEvents(t, list(t, j.After(0, "")), all[max(0, len(all)-10):])
}

// AppendBatch is all or nothing, and a journal at seq 2^64-1 refuses to
// append rather than wrap.
func TestAppendBatchAndSeqLimit(t *testing.T) {
	path := journalPath(t)
	fs := newFaultFS()
	j := mustOpen(t, path, Options{fs: fs})
	fs.set("write", syscall.ENOSPC)
	if _, err := j.AppendBatch(batchOf("b", 3)); !errors.Is(err, syscall.ENOSPC) || j.Len() != 0 {
		t.Fatalf("AppendBatch on a full disk: %v, %d visible", err, j.Len())
	}
	fs.clear("write")
	got, err := j.AppendBatch(batchOf("b", 3))
	if err != nil || len(got) != 3 || got[2].Seq != 3 || j.Len() != 3 {
		t.Fatalf("AppendBatch: %v %+v", err, got)
	}
	mustClose(t, j)

	writeFile(t, path, []byte(`{"type":"exit","id":"c","timestamp":"2026-03-01T12:00:00Z","seq":18446744073709551615}`+"\n"))
	j = mustOpen(t, path, Options{})
	defer mustClose(t, j)
	if _, err := j.Append(Event{Type: TypeOOM, ID: "c"}); !errors.Is(err, ErrSeqExhausted) {
		t.Fatalf("Append after seq 2^64-1: %v", err)
	}
	if seq, _ := j.Last(); seq != 1<<64-1 {
		t.Fatalf("Last = %d", seq)
	}
}

// Under SyncBatch and SyncNone, Append writes nothing: Commit writes the
// batch in one write(2), then syncs (batch). Under SyncAlways each Append
// is written and synced at once. A batch interrupted before its Commit
// leaves nothing on disk, and a reopened journal has only what was committed.
func TestAppendWritesAtCommit(t *testing.T) {
	for _, tc := range []struct {
		policy    SyncPolicy
		perCommit int // writes for 32 appends and their Commit
	}{{SyncBatch, 1}, {SyncNone, 1}, {SyncAlways, 32}} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			path := journalPath(t)
			fs := newFaultFS()
			j := mustOpen(t, path, Options{Sync: tc.policy, fs: fs})
			committed := appendN(t, j, 3)
			size := fileSize(t, j.active.path)
			w0 := fs.writeCount()
			for _, ev := range batchOf("b", 32) {
				if _, err := j.Append(ev); err != nil {
					t.Fatal(err)
				}
			}
			if tc.perCommit == 1 {
				if got := fileSize(t, j.active.path); got != size || fs.writeCount() != w0 {
					t.Fatalf("before Commit: file %d bytes (was %d), %d writes: appends reached the file", got, size, fs.writeCount()-w0)
				}
			}
			if err := j.Commit(); err != nil {
				t.Fatal(err)
			}
			if got := fs.writeCount() - w0; got != tc.perCommit {
				t.Fatalf("32 appends and a Commit made %d writes, want %d", got, tc.perCommit)
			}
			for _, ev := range batchOf("lost", 5) {
				if _, err := j.Append(ev); err != nil {
					t.Fatal(err)
				}
			}
			all := list(t, j.After(0, ""))
			if len(all) != 35 {
				t.Fatalf("%d events visible, want 35 (the uncommitted 5 are not)", len(all))
			}
			// Reopen the file without closing j (Close would commit): what a
			// crash before the Commit leaves.
			k := mustOpen(t, path, Options{})
			defer mustClose(t, k)
			reopened := list(t, k.After(0, ""))
			if tc.perCommit == 1 {
				assertEvents(t, reopened, all)
			}
			assertEvents(t, reopened[:3], committed)
		})
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
