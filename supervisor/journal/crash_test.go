//go:build failpoints

package journal

import (
	"fmt"
	"syscall"
	"testing"
)

// The steps of each file operation, in order (see compactStep).
var (
	rewriteSteps = []compactStep{stepCreate, stepWrite, stepSync, stepRename, stepSyncDir}
	sealSteps    = []compactStep{stepSealSync, stepSealIndex, stepSealCreate, stepSealSyncDir}
	retainSteps  = []compactStep{stepRemoveLog, stepRemoveIdx}
)

// crashOnce returns a failpoints.crashAt hook that fires the first time step is reached.
func crashOnce(step compactStep, fired *bool) func(compactStep) bool {
	return func(s compactStep) bool {
		if s != step || *fired {
			return false
		}
		*fired = true
		return true
	}
}

// A crash at any step of a rewrite, a seal or a retention leaves a journal
// that reopens with every committed event it must retain, in order, without
// duplicates or seq gaps, and appends after it.
func TestCrashAtEveryStep(t *testing.T) {
	const retain, per = 10, 8
	steps := append(append(append([]compactStep(nil), rewriteSteps...), sealSteps...), retainSteps...)
	for _, step := range steps {
		t.Run(string(step), func(t *testing.T) {
			path := journalPath(t)
			var fired bool
			fs := newFaultFS()
			opts := Options{RetainCount: retain, segmentRecords: per, fs: fs, failpoints: failpoints{crashAt: crashOnce(step, &fired)}}
			committed, pending := crashWriting(t, path, opts, fs)
			if !fired {
				t.Fatalf("never reached step %s", step)
			}
			j := mustOpen(t, path, Options{RetainCount: retain, segmentRecords: per})
			defer mustClose(t, j)
			got := list(t, j.After(0, ""))
			assertOrdered(t, got)
			// What the crash interrupted may or may not have reached the disk.
			want := committed
			if len(pending) > 0 && len(got) > 0 && got[len(got)-1].Seq == pending[len(pending)-1].Seq {
				want = append(committed, pending...)
			}
			assertEvents(t, got, want[max(0, len(want)-retain):])
			assertNoTemps(t, path)
			next := mustAppend(t, j, Event{Type: TypeOOM, ID: "after"})
			if next.Seq != got[len(got)-1].Seq+1 {
				t.Fatalf("seq after reopen %d, last before crash %d", next.Seq, got[len(got)-1].Seq)
			}
		})
	}
}

// crashWriting appends and commits until the crash hook stops the journal,
// making every 7th commit's fsync fail so that rewrites happen too. It
// returns the committed events and the batch in flight at the crash.
func crashWriting(t *testing.T, path string, opts Options, fs *faultFS) (committed, pending []Event) {
	t.Helper()
	j := mustOpen(t, path, opts)
	for i := 0; j.halted() == nil && i < 1000; i++ {
		if i%7 == 3 && i > 20 {
			fs.set("sync", syscall.EIO)
		}
		batch := batchOf(fmt.Sprint(i), 2)
		stored, err := appendBatch(j, batch)
		fs.clear("sync")
		switch {
		case err == nil:
			committed = append(committed, stored...)
		case j.halted() != nil:
			pending = stored
		}
	}
	abandon(j)
	return committed, pending
}
