package journal

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
)

// buildJournal writes n events through the API and returns them with the
// file's bytes and the end offset of each record.
func buildJournal(t *testing.T, n int) (evs []Event, data []byte, ends []int) {
	t.Helper()
	path := journalPath(t)
	j := mustOpen(t, path, Options{Sync: SyncAlways, Now: frozen(t0)})
	evs = appendN(t, j, n, "a", "b")
	mustClose(t, j)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range data {
		if b == '\n' {
			ends = append(ends, i+1)
		}
	}
	return evs, data, ends
}

// validPrefix returns how many records end at or before cut.
func validPrefix(ends []int, cut int) int {
	n := 0
	for n < len(ends) && ends[n] <= cut {
		n++
	}
	return n
}

// The crash test of STYLE.md: cut the file at every byte offset inside its
// last 3 records; Open must keep exactly the complete records, cut the rest,
// warn, and leave a file that a new Append extends cleanly.
func TestTornTailAtEveryOffset(t *testing.T) {
	evs, data, ends := buildJournal(t, 6)
	for cut := ends[len(ends)-4]; cut < len(data); cut++ {
		t.Run(fmt.Sprintf("cut=%d", cut), func(t *testing.T) {
			keep := validPrefix(ends, cut)
			path := journalPath(t)
			writeFile(t, path, data[:cut])
			log, hook := quietLogger()
			j := mustOpen(t, path, Options{Logger: log})
			assertEvents(t, list(t, j.After(0, "")), evs[:keep])
			checkTailCut(t, j, hook.AllEntries(), cut-ends[keep-1])
			next := mustAppend(t, j, Event{Type: TypeOOM, ID: "z"})
			mustClose(t, j)
			assertCleanFile(t, path)
			j = mustOpen(t, path, Options{})
			defer mustClose(t, j)
			assertEvents(t, list(t, j.After(0, "")), append(append([]Event(nil), evs[:keep]...), next))
			assertOrdered(t, list(t, j.After(0, "")))
		})
	}
}

func checkTailCut(t *testing.T, j *Journal, entries []*logrus.Entry, dropped int) {
	t.Helper()
	if s := j.Stats(); s.DroppedTornBytes != uint64(dropped) || (dropped > 0) != (s.DroppedTornRecords == 1) {
		t.Fatalf("stats %+v, want %d dropped bytes", s, dropped)
	}
	if dropped == 0 {
		return
	}
	for _, e := range entries {
		if e.Level == logrus.WarnLevel && e.Data["file"] == j.active.path && e.Data["dropped_bytes"] == int64(dropped) {
			if _, ok := e.Data["offset"]; ok {
				return
			}
		}
	}
	t.Fatalf("no warning naming file, offset and %d dropped bytes in %v", dropped, entries)
}

func TestLoadDamagedFiles(t *testing.T) {
	evs, data, ends := buildJournal(t, 4)
	nuls := bytes.Repeat([]byte{0}, 4096)
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	line := func(i int) []byte { return recordAt(data, ends, i) }
	tests := []struct {
		name            string
		file            []byte
		want            []Event
		droppedBytes    int
		droppedRecords  uint64
		skippedRecords  uint64
		wantFileUnmoved bool
	}{
		{"empty file", nil, nil, 0, 0, 0, true},
		{"NUL-filled tail", cat(data, nuls), evs, len(nuls), 1, 0, false},
		{"NULs then newline", cat(data, nuls, []byte("\n")), evs, len(nuls) + 1, 1, 0, false},
		{"only NULs", nuls, nil, len(nuls), 1, 0, false},
		{"garbage lines at the end", cat(data, []byte("not json\nnull\n{}\n")), evs, 17, 3, 0, false},
		{"garbage middle line", cat(line(0), []byte("garbage\n"), line(1), []byte("{\"type\":\n"), line(2), line(3)), evs, 0, 0, 2, true},
		{"NULs before a valid record", cat(line(0), nuls, line(1), line(2), line(3)), evs, 0, 0, 0, true},
		{"torn line followed by valid ones", cat(line(0), line(1)[:20], []byte("\n"), line(1), line(2), line(3)), evs, 0, 0, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := journalPath(t)
			writeFile(t, path, tt.file)
			j := mustOpen(t, path, Options{})
			defer mustClose(t, j)
			assertEvents(t, list(t, j.After(0, "")), tt.want)
			s := j.Stats()
			if s.DroppedTornBytes != uint64(tt.droppedBytes) || s.DroppedTornRecords != tt.droppedRecords || s.SkippedRecords != tt.skippedRecords {
				t.Fatalf("stats %+v", s)
			}
			if fi, _ := os.Stat(path); (fi.Size() == int64(len(tt.file))) != tt.wantFileUnmoved {
				t.Fatalf("file size %d of %d", fi.Size(), len(tt.file))
			}
			mustAppend(t, j, Event{Type: TypeOOM, ID: "z"})
		})
	}
}

func recordAt(data []byte, ends []int, i int) []byte {
	start := 0
	if i > 0 {
		start = ends[i-1]
	}
	return data[start:ends[i]]
}

// v0.2.9 wrote id,type,timestamp (local offset),pid,status with no seq, and
// statuses that may be negative or above 255.
func TestLoadV029Records(t *testing.T) {
	const old = `{"id":"c1","type":"start-container","timestamp":"2017-03-01T10:00:00.123456789+01:00"}
{"id":"c1","type":"start-process","timestamp":"2017-03-01T10:00:01.5+01:00","pid":"e1"}
{"id":"c1","type":"exit","timestamp":"2017-03-01T10:00:02+01:00","pid":"e1","status":-1}
{"id":"c1","type":"exit","timestamp":"2017-03-01T10:00:03-05:00","pid":"init","status":300}
{"id":"c2","type":"exit","timestamp":"2017-03-01T15:00:04.000000001-05:00","pid":"init","status":137}
{"id":"c2","type":"oom","timestamp":"2017-03-01T15:00:04.000000001-05:00"}
`
	loc := time.FixedZone("", 3600)
	est := time.FixedZone("", -5*3600)
	ts4 := time.Date(2017, 3, 1, 15, 0, 4, 1, est)
	want := []Event{
		{Type: TypeStartContainer, ID: "c1", Timestamp: time.Date(2017, 3, 1, 10, 0, 0, 123456789, loc), Seq: 1},
		{Type: TypeStartProcess, ID: "c1", Pid: "e1", Timestamp: time.Date(2017, 3, 1, 10, 0, 1, 5e8, loc), Seq: 2},
		{Type: TypeExit, ID: "c1", Pid: "e1", Status: 255, Timestamp: time.Date(2017, 3, 1, 10, 0, 2, 0, loc), Seq: 3},
		{Type: TypeExit, ID: "c1", Pid: "init", Status: 255, Timestamp: time.Date(2017, 3, 1, 10, 0, 3, 0, est), Seq: 4},
		{Type: TypeExit, ID: "c2", Pid: "init", Status: 137, Timestamp: ts4, Seq: 5},
		// Same wall time as the previous one: moved 1 ns on to keep "strictly after" exact.
		{Type: TypeOOM, ID: "c2", Timestamp: ts4.Add(1), Seq: 6},
	}
	path := journalPath(t)
	writeFile(t, path, []byte(old))
	j := mustOpen(t, path, Options{})
	assertEvents(t, list(t, j.After(0, "")), want)
	assertEvents(t, list(t, j.Since(want[2].Timestamp, "c1")), want[3:4])
	if s := j.Stats(); s.Renumbered != 1 || s.Loaded != 6 {
		t.Fatalf("stats %+v", s)
	}
	next := mustAppend(t, j, Event{Type: TypeStartContainer, ID: "c3"})
	if next.Seq != 7 {
		t.Fatalf("seq after v0.2.9 records = %d", next.Seq)
	}
	mustClose(t, j)
	if data, _ := os.ReadFile(path); !bytes.HasPrefix(data, []byte(old)) {
		t.Fatal("Open rewrote the v0.2.9 records")
	}
}

// v0.2.9 truncated the journal at start-up. Repeated opens must keep it all.
func TestOpenNeverEmptiesHistory(t *testing.T) {
	path := journalPath(t)
	j := mustOpen(t, path, Options{})
	want := appendN(t, j, 5)
	mustClose(t, j)
	for i := range 3 {
		j = mustOpen(t, path, Options{RetainCount: 100})
		assertEvents(t, list(t, j.After(0, "")), want)
		if i == 1 {
			abandon(j) // a crash right after start-up
			continue
		}
		mustClose(t, j)
	}
}

func TestStaleTempFilesRemoved(t *testing.T) {
	path := journalPath(t)
	stale := filepath.Join(filepath.Dir(path), tempPrefix+"123")
	other := filepath.Join(filepath.Dir(path), "events.log.bak")
	writeFile(t, stale, []byte("partial"))
	writeFile(t, other, []byte("keep me"))
	mustClose(t, mustOpen(t, path, Options{}))
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale temp file still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("unrelated file removed: %v", err)
	}
}

func TestLongGarbageLineIsBounded(t *testing.T) {
	evs, data, _ := buildJournal(t, 2)
	path := journalPath(t)
	long := strings.Repeat("x", 3*maxRecordSize)
	writeFile(t, path, append(append([]byte(long+"\n"), data...), long...))
	j := mustOpen(t, path, Options{})
	defer mustClose(t, j)
	assertEvents(t, list(t, j.After(0, "")), evs)
	if s := j.Stats(); s.SkippedRecords != 1 || s.DroppedTornBytes != uint64(len(long)) {
		t.Fatalf("stats %+v", s)
	}
}
