package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// crashOnce returns a crashAt hook that fires the first time step is reached.
func crashOnce(step compactStep, fired *bool) func(compactStep) bool {
	return func(s compactStep) bool {
		if s != step || *fired {
			return false
		}
		*fired = true
		return true
	}
}

// A crash at any step of a compaction, whether run by Append or by Open,
// must leave a journal that reopens with at least the last RetainCount
// events, in order, without duplicates or seq gaps.
func TestCompactionCrashAtEveryStep(t *testing.T) {
	const retain = 10
	for _, step := range compactSteps {
		for _, during := range []string{"append", "open"} {
			t.Run(fmt.Sprintf("%s/%s", during, step), func(t *testing.T) {
				path := journalPath(t)
				var fired bool
				want := crashCompaction(t, path, during, Options{RetainCount: retain, crashAt: crashOnce(step, &fired)})
				if !fired {
					t.Fatalf("compaction never reached step %s", step)
				}
				j := mustOpen(t, path, Options{RetainCount: retain})
				defer mustClose(t, j)
				got := j.After(0, "")
				if len(got) < retain {
					t.Fatalf("reopened with %d events, want >= %d", len(got), retain)
				}
				assertOrdered(t, got)
				assertEvents(t, got[len(got)-retain:], want[len(want)-retain:])
				assertNoTemps(t, path)
				next := mustAppend(t, j, Event{Type: TypeOOM, ID: "after"})
				if next.Seq != want[len(want)-1].Seq+1 {
					t.Fatalf("seq after reopen %d, last before crash %d", next.Seq, want[len(want)-1].Seq)
				}
			})
		}
	}
}

// crashCompaction drives a compaction that the hook in opts stops, then drops
// the journal as a dead process would. It returns every event appended.
func crashCompaction(t *testing.T, path, during string, opts Options) []Event {
	t.Helper()
	if during == "open" {
		j := mustOpen(t, path, Options{}) // unbounded: grows past the threshold
		want := appendN(t, j, 300)
		mustClose(t, j)
		j = mustOpen(t, path, opts)
		abandon(j)
		return want
	}
	j := mustOpen(t, path, opts)
	var want []Event
	for j.halted == nil && len(want) < 1000 {
		ev, err := j.Append(Event{Type: TypeExit, ID: "c", Pid: fmt.Sprint(len(want))})
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
		want = append(want, ev)
		_ = j.Commit() // fails once the crash has happened
	}
	if !errors.Is(j.halted, errSimulatedCrash) {
		t.Fatalf("journal not stopped by the simulated crash: %v", j.halted)
	}
	abandon(j)
	return want
}

func assertNoTemps(t *testing.T, path string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".compact-") {
			t.Fatalf("leftover temp file %s", e.Name())
		}
	}
}

func TestRetainCountCompaction(t *testing.T) {
	tests := []struct {
		retain, appends int
		wantCompactions bool
	}{
		{1, 500, true},
		{10, 1000, true},
		{100, 1000, true},
		{1000, 5000, true},
		{0, 3000, false},
		{5000, 3000, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("retain=%d", tt.retain), func(t *testing.T) {
			path := journalPath(t)
			j := mustOpen(t, path, Options{RetainCount: tt.retain, Sync: SyncNone})
			want := appendBounded(t, j, tt.appends, tt.retain)
			got := j.After(0, "")
			keep := min(len(want), max(tt.retain, len(got)))
			assertEvents(t, got, want[len(want)-keep:])
			if s := j.Stats(); (s.Compactions > 0) != tt.wantCompactions || s.CompactionErrors != 0 {
				t.Fatalf("stats %+v", s)
			}
			mustClose(t, j)
			assertCleanFile(t, path)
			j = mustOpen(t, path, Options{RetainCount: tt.retain})
			defer mustClose(t, j)
			assertEvents(t, j.After(0, ""), got) // memory and file agree
		})
	}
}

// appendBounded appends n events and checks after each that memory stays
// within the threshold (RetainCount 0: everything is kept).
func appendBounded(t *testing.T, j *Journal, n, retain int) []Event {
	t.Helper()
	var want []Event
	for i := range n {
		want = append(want, appendN(t, j, 1)...)
		limit := i + 1
		if retain > 0 {
			limit = min(limit, j.threshold())
		}
		if j.Len() > limit || j.Len() < min(i+1, retain) || (retain > 0 && cap(j.all) > j.threshold()+1) {
			t.Fatalf("after %d appends: Len %d cap %d, retain %d", i+1, j.Len(), cap(j.all), retain)
		}
	}
	return want
}

// An unbounded file opened with a retain count is compacted at Open, and a
// later crash cannot bring back what was dropped nor lose what was kept.
func TestOpenCompactsLongFile(t *testing.T) {
	path := journalPath(t)
	j := mustOpen(t, path, Options{Sync: SyncNone})
	want := appendN(t, j, 1000, "a", "b")
	mustClose(t, j)
	j = mustOpen(t, path, Options{RetainCount: 100})
	assertEvents(t, j.After(0, ""), want[900:])
	if s := j.Stats(); s.Compactions != 1 || s.Loaded != 1000 {
		t.Fatalf("stats %+v", s)
	}
	abandon(j)
	j = mustOpen(t, path, Options{})
	defer mustClose(t, j)
	assertEvents(t, j.After(0, ""), want[900:])
}
