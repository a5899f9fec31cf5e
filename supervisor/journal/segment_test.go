package journal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Retention removes whole old segments: the journal serves exactly the last
// RetainCount events, keeps on disk at most two segments more, holds at
// most one segment's events in memory, and reopens to the same events.
func TestRetention(t *testing.T) {
	const per = 8
	tests := []struct{ retain, appends int }{{1, 100}, {10, 100}, {20, 50}, {0, 100}, {500, 100}}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("retain=%d", tt.retain), func(t *testing.T) {
			path := journalPath(t)
			opts := Options{RetainCount: tt.retain, Sync: SyncNone, segmentRecords: per}
			j := mustOpen(t, path, opts)
			var want []Event
			for range tt.appends {
				want = append(want, appendN(t, j, 1)...)
				if len(j.active.evs) > per {
					t.Fatalf("%d events in memory, segments of %d", len(j.active.evs), per)
				}
			}
			served := want
			if tt.retain > 0 {
				served = want[max(0, len(want)-tt.retain):]
			}
			assertEvents(t, list(t, j.After(0, "")), served)
			if j.Len() != len(served) {
				t.Fatalf("Len %d, want %d", j.Len(), len(served))
			}
			if removed := j.Stats().RemovedSegments; (removed > 0) != (tt.retain > 0 && tt.retain+2*per < tt.appends) {
				t.Fatalf("%d segments removed", removed)
			}
			mustClose(t, j)
			if n := eventsOnDisk(t, filepath.Dir(path)); tt.retain > 0 && n > tt.retain+2*per {
				t.Fatalf("%d events on disk for retain %d", n, tt.retain)
			}
			j = mustOpen(t, path, opts)
			defer mustClose(t, j)
			assertEvents(t, list(t, j.After(0, "")), served)
		})
	}
}

// eventsOnDisk counts the records of every segment of dir.
func eventsOnDisk(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if _, ext, ok := parseSegName(e.Name()); ok && ext == segLog {
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			n += strings.Count(string(data), "\n")
		}
	}
	return n
}

func assertNoTemps(t *testing.T, path string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			t.Fatalf("leftover temp file %s", e.Name())
		}
	}
}

// Open reads the indexes and the newest segment only: damage inside a
// sealed segment's records is not even looked at, while an index that is
// missing, unreadable or longer than its segment makes Open scan that one
// segment again; an index left without its segment is removed.
func TestOpenUsesIndexes(t *testing.T) {
	const per = 8
	path := journalPath(t)
	dir := filepath.Dir(path)
	opts := Options{segmentRecords: per, Sync: SyncNone}
	j := mustOpen(t, path, opts)
	want := appendN(t, j, 5*per+3)
	mustClose(t, j)

	j = mustOpen(t, path, opts)
	if len(j.active.evs) != 3 || j.Stats().Loaded != uint64(len(want)) {
		t.Fatalf("active holds %d events, loaded %d", len(j.active.evs), j.Stats().Loaded)
	}
	mustClose(t, j)

	damaged := filepath.Join(dir, segName(per+1, segIdx))
	writeFile(t, damaged, []byte("{garbage\n"))
	if err := os.Remove(filepath.Join(dir, segName(2*per+1, segIdx))); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, segName(1000, segIdx)), []byte("orphan\n"))
	j = mustOpen(t, path, opts)
	defer mustClose(t, j)
	assertEvents(t, list(t, j.After(0, "")), want)
	for _, base := range []uint64{per + 1, 2*per + 1} {
		if _, err := readSummary(filepath.Join(dir, segName(base, segIdx))); err != nil {
			t.Fatalf("index of segment %d not rebuilt: %v", base, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, segName(1000, segIdx))); !os.IsNotExist(err) {
		t.Fatalf("orphan index kept: %v", err)
	}
}

// A sealed segment cut short (a damaged disk) loses only what was cut: its
// index is rebuilt from what remains and the other segments are served.
func TestSealedSegmentCutShort(t *testing.T) {
	const per = 8
	path := journalPath(t)
	dir := filepath.Dir(path)
	opts := Options{segmentRecords: per, Sync: SyncNone}
	j := mustOpen(t, path, opts)
	want := appendN(t, j, 3*per)
	mustClose(t, j)
	seg := filepath.Join(dir, segName(per+1, segLog))
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	ends := strings.Index(string(data), "\n") + 1
	writeFile(t, seg, data[:ends+5]) // one record and a torn one
	j = mustOpen(t, path, opts)
	defer mustClose(t, j)
	assertEvents(t, list(t, j.After(0, "")), append(append([]Event(nil), want[:per+1]...), want[2*per:]...))
}

// Replays seek by seq and by time into any segment, at and between seek
// marks, and agree with the events appended.
func TestSeekAcrossSegments(t *testing.T) {
	const per = 300 // three seek marks a segment
	path := journalPath(t)
	j := mustOpen(t, path, Options{segmentRecords: per, Sync: SyncNone, Now: frozen(t0)})
	all := appendN(t, j, 4*per+17, "a", "b", "c")
	mustClose(t, j)
	j = mustOpen(t, path, Options{segmentRecords: per})
	defer mustClose(t, j)
	for _, k := range []int{0, 1, 127, 128, 129, 299, 300, 301, 555, 900, 1199, 1200, 1201, len(all) - 2, len(all) - 1} {
		assertEvents(t, list(t, j.After(all[k].Seq, "")), all[k+1:])
		assertEvents(t, list(t, j.Since(all[k].Timestamp, "")), all[k+1:])
		assertEvents(t, list(t, j.After(all[k].Seq, "b")), onlyID(all[k+1:], "b"))
	}
	if ev, ok := j.Oldest(); !ok || ev.Seq != 1 {
		t.Fatalf("Oldest = %+v %v", ev, ok)
	}
	// A replay past a whole segment decodes the next ones ahead, in order.
	r := j.After(0, "")
	var got []Event
	for range per + 2 {
		ev, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	if r.pf == nil {
		t.Fatal("a long replay does not decode ahead")
	}
	assertEvents(t, append(got, list(t, r)...), all)
}

// Memory holds one segment's events whatever the retain count, even 0
// (keep all), and a seal that keeps failing stops appends past four
// segments' worth with an error instead of growing.
func TestMemoryBounded(t *testing.T) {
	const per = 8
	path := journalPath(t)
	fs := newFaultFS()
	j := mustOpen(t, path, Options{segmentRecords: per, fs: fs})
	defer mustClose(t, j)
	appendN(t, j, 10*per)
	if len(j.active.evs) > per {
		t.Fatalf("%d events in memory", len(j.active.evs))
	}
	fs.set("create", syscall.ENOSPC) // no index temp file: sealing fails
	for i := 0; ; i++ {
		if _, err := j.AppendBatch(batchOf("m", 1)); err != nil {
			assertWriteError(t, err, syscall.ENOSPC, j.active.path)
			break
		}
		if i > 5*per {
			t.Fatal("appends never refused while sealing fails")
		}
	}
	if len(j.active.evs) > 4*per || j.Stats().SealErrors == 0 {
		t.Fatalf("%d events in memory, %+v", len(j.active.evs), j.Stats())
	}
	fs.clear("create")
	if _, err := j.AppendBatch(batchOf("m", 1)); err != nil {
		t.Fatalf("after the fault: %v", err)
	}
	if len(j.active.evs) > per {
		t.Fatalf("%d events in memory after sealing again", len(j.active.evs))
	}
}

// The newest segment cut shorter than its index says (a damaged disk after
// a seal) becomes the active one again: its stale index is removed, so
// that later appends never make it pass for that index.
func TestStaleIndexOfNewestSegmentRemoved(t *testing.T) {
	const per = 8
	path := journalPath(t)
	dir := filepath.Dir(path)
	opts := Options{segmentRecords: per, Sync: SyncNone}
	j := mustOpen(t, path, opts)
	want := appendN(t, j, per)
	mustClose(t, j)
	if err := os.Remove(filepath.Join(dir, segName(per+1, segLog))); err != nil {
		t.Fatal(err) // the empty segment started after the seal
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, data[:len(data)-1]) // last record torn
	j = mustOpen(t, path, opts)
	if _, err := os.Stat(filepath.Join(dir, segName(1, segIdx))); !os.IsNotExist(err) {
		t.Fatalf("stale index kept: %v", err)
	}
	more := appendN(t, j, 3)
	mustClose(t, j)
	j = mustOpen(t, path, opts)
	defer mustClose(t, j)
	assertEvents(t, list(t, j.After(0, "")), append(want[:per-1], more...))
}

// Backward walks the served events newest first, across segments, and
// stops at the retain count.
func TestBackward(t *testing.T) {
	const per = 8
	path := journalPath(t)
	j := mustOpen(t, path, Options{segmentRecords: per, RetainCount: 20})
	defer mustClose(t, j)
	all := appendN(t, j, 5*per+3)
	b := j.Backward()
	var got []Event
	for {
		ev, err := b.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append([]Event{ev}, got...)
	}
	assertEvents(t, got, all[len(all)-20:])
}

// A seal that wrote the index but could not start the next segment leaves
// no index behind: the segment stays the active one, and a restart finds
// every event appended to it afterwards.
func TestSealFailingAfterIndex(t *testing.T) {
	const per = 4
	path := journalPath(t)
	fs := newFaultFS()
	opts := Options{segmentRecords: per, fs: fs}
	j := mustOpen(t, path, opts)
	fs.set("open", syscall.EMFILE)
	want := appendN(t, j, per+2)
	if j.Stats().SealErrors == 0 {
		t.Fatal("the seal did not fail")
	}
	mustClose(t, j)
	fs.clear("open")
	j = mustOpen(t, path, Options{segmentRecords: per})
	defer mustClose(t, j)
	assertEvents(t, list(t, j.After(0, "")), want)
	if next := mustAppend(t, j, Event{Type: TypeOOM, ID: "z"}); next.Seq != uint64(len(want))+1 {
		t.Fatalf("next seq %d", next.Seq)
	}
}

// A replay prefetchAfter records into a segment read in line has the
// segments after it decoded ahead while it reads on, and moves to them at
// the end of the segment: nothing skipped or repeated, filtered or not.
func TestPrefetchStartsWithinASegment(t *testing.T) {
	const per = prefetchAfter + 300
	path := journalPath(t)
	j := mustOpen(t, path, Options{segmentRecords: per, Sync: SyncNone, Now: frozen(t0)})
	var all []Event
	for range 3 {
		evs := make([]Event, per)
		for i := range evs {
			evs[i] = Event{Type: TypeExit, ID: fmt.Sprintf("c%d", i%7)}
		}
		got, err := j.AppendBatch(evs)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, got...)
	}
	all = append(all, appendN(t, j, 5, "c1")...)
	mustClose(t, j)
	j = mustOpen(t, path, Options{segmentRecords: per, Sync: SyncNone})
	defer mustClose(t, j)

	r := j.After(10, "")
	var got []Event
	for range prefetchAfter {
		ev, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	if r.pf == nil || r.sr == nil {
		t.Fatalf("prefetch %v, in line %v: want both", r.pf != nil, r.sr != nil)
	}
	assertEvents(t, append(got, list(t, r)...), all[10:])
	assertEvents(t, list(t, j.After(0, "c3")), onlyID(all, "c3"))
	assertEvents(t, list(t, j.After(per-5, "")), all[per-5:])
}
