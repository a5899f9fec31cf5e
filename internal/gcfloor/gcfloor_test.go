package gcfloor

import (
	"os"
	"runtime"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const MiB = 1 << 20
	for _, c := range []struct {
		live, headroom uint64
		want           int
	}{
		{0, 8 * MiB, 200},           // nothing marked yet: the runtime's minimum alone, 8 MiB
		{2 * MiB, 8 * MiB, 250},     // the minimum (10 MiB) decides, not 8/2 = 400
		{6 * MiB, 8 * MiB, 133},     // 6 × 2.33 = 14 MiB; the minimum would be 5.3
		{8 * MiB, 8 * MiB, 100},     // exactly the default
		{64 * MiB, 8 * MiB, 100},    // a large heap: the default, never lower
		{1 * MiB, 16 * MiB, 425},    // (1+16)/4
		{512 * MiB, 16 * MiB, 100},  // large
		{3 * MiB, 0, 100},           // no headroom asked
		{100 * MiB, 400 * MiB, 400}, // headroom/live
	} {
		if got := Percent(c.live, c.headroom); got != c.want {
			t.Errorf("Percent(%d MiB, %d MiB) = %d, want %d", c.live/MiB, c.headroom/MiB, got, c.want)
		}
	}
}

// After collections, the goal the runtime set is at least the live heap
// plus the headroom (for a test binary's small heap, up to the 4 MiB-scaled
// minimum above it), and Stop puts GOGC back to 100.
func TestKeepRaisesTheGoal(t *testing.T) {
	noOperatorGOGC(t)
	const headroom = 12 << 20
	tu := Keep(headroom)
	defer tu.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for tu.cycles.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d GC cycles seen by the tuner in 10 s, want 3", tu.cycles.Load())
		}
		runtime.GC()
		runtime.Gosched()
	}
	runtime.GC() // a goal computed with the tuned GOGC
	live, goal, gogc := readMetric("/gc/heap/live:bytes"), readMetric("/gc/heap/goal:bytes"), readMetric("/gc/gogc:percent")
	if want := Percent(live, headroom); gogc < uint64(want)*9/10 || gogc > uint64(want)*11/10+1 {
		t.Errorf("GOGC %d with a live heap of %d bytes, want about %d", gogc, live, want)
	}
	if goal < live+headroom*9/10 {
		t.Errorf("heap goal %d bytes, live %d: less than the %d bytes of headroom asked", goal, live, headroom)
	}
	tu.Stop()
	if gogc := readMetric("/gc/gogc:percent"); gogc != 100 {
		t.Errorf("GOGC %d after Stop, want 100", gogc)
	}
}

// Paused, the tuner leaves GOGC at 100 through later collections; resumed,
// it raises it again.
func TestPauseResume(t *testing.T) {
	noOperatorGOGC(t)
	const headroom = 12 << 20
	tu := Keep(headroom)
	defer tu.Stop()
	if gogc := readMetric("/gc/gogc:percent"); gogc <= 100 {
		t.Fatalf("GOGC %d right after Keep, want above 100", gogc)
	}
	tu.Pause()
	seen := tu.cycles.Load()
	deadline := time.Now().Add(10 * time.Second)
	for tu.cycles.Load() < seen+2 {
		if time.Now().After(deadline) {
			t.Fatalf("the tuner saw %d GC cycles in 10 s while paused, want 2", tu.cycles.Load()-seen)
		}
		runtime.GC()
		runtime.Gosched()
	}
	if gogc := readMetric("/gc/gogc:percent"); gogc != 100 {
		t.Errorf("GOGC %d after collections while paused, want 100", gogc)
	}
	tu.Resume()
	if gogc := readMetric("/gc/gogc:percent"); gogc <= 100 {
		t.Errorf("GOGC %d after Resume, want above 100", gogc)
	}
}

// An operator's GOGC wins: Keep, Pause and Resume leave GOGC as it was.
func TestKeepLeavesAnOperatorsGOGC(t *testing.T) {
	t.Setenv("GOGC", "100") // read by the runtime at start only; Keep looks at it
	tu := Keep(12 << 20)
	defer tu.Stop()
	tu.Pause()
	tu.Resume()
	runtime.GC()
	if gogc := readMetric("/gc/gogc:percent"); gogc != 100 {
		t.Errorf("GOGC %d with GOGC set in the environment, want it left at 100", gogc)
	}
}

// noOperatorGOGC runs the test as if GOGC were not in the environment.
func noOperatorGOGC(t *testing.T) {
	t.Setenv("GOGC", "") // restored after the test
	os.Unsetenv("GOGC")
}

// After ResumeOnNextCycle a paused tuner stays paused through the
// collections completed before the call (the trim's own) and resumes at the
// first one after it.
func TestResumeOnNextCycle(t *testing.T) {
	noOperatorGOGC(t)
	tu := Keep(12 << 20)
	defer tu.Stop()
	tu.Pause()
	seen := tu.cycles.Load()
	runtime.GC() // the trim's collection: its cleanup may run before or after the call below
	tu.ResumeOnNextCycle()
	waitCycles(t, tu, seen+1, false) // until that cleanup ran (no new collection)
	if gogc := readMetric("/gc/gogc:percent"); gogc != 100 || !tu.paused.Load() {
		t.Fatalf("GOGC %d, paused %v after the collection made before ResumeOnNextCycle, want 100 and paused", gogc, tu.paused.Load())
	}
	waitCycles(t, tu, tu.cycles.Load()+1, true) // a collection of new work
	if gogc := readMetric("/gc/gogc:percent"); gogc <= 100 || tu.paused.Load() {
		t.Fatalf("GOGC %d, paused %v after the next collection, want above 100 and resumed", gogc, tu.paused.Load())
	}
}

// waitCycles waits until the tuner has seen n cycles, running collections
// itself when collect is set; without, it only waits for the cleanup of a
// collection already made.
func waitCycles(t *testing.T, tu *Tuner, n uint64, collect bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for tu.cycles.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the tuner saw %d GC cycles in 10 s, want %d", tu.cycles.Load(), n)
		}
		if collect {
			runtime.GC()
		}
		runtime.Gosched()
	}
}
