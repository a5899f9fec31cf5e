// Package gcfloor keeps the garbage collector from running more often than
// a program's bursts need.
//
// The Go GC sets its next heap goal at the live heap times (1 + GOGC/100),
// but never below 4 MiB. The daemon's live heap is 2-4 MiB, so under a
// burst of requests (a replay streaming thousands of events, a hundred
// State polls) it collected every 2-4 MiB of garbage: every 50 ms, and a
// collection on a 2-CPU machine takes a quarter of the CPU for a
// millisecond or two and stops the world briefly, which is where the slow
// tail of a burst's replies came from (bench: replay_last100_of_10m_grpc_ms
// 1.5-1.8 ms with GOGC=100, 1.3-1.5 with the goal 16 MiB above the live
// heap).
//
// Keep raises GOGC after each collection so that the next goal is at
// least the live heap plus a fixed headroom, and never lowers it below the
// 100 the program started with: a large live heap is collected as before.
// The headroom is only garbage between two collections, and is wanted only
// during bursts: Pause puts GOGC back to 100 until Resume (or, after
// ResumeOnNextCycle, until the next collection). The daemon pauses the tuner
// when it goes idle, before it returns the free heap to the OS
// (containerd/trim.go): left on, an idle daemon's slow trickle of
// allocations grew its heap toward the raised goal with no collection to
// stop it (bench: daemon_rss_100_mib 9.6 -> 19.9 MiB).
//
// A GOGC set in the environment is the operator's choice: Keep then leaves
// the collector alone.
package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"sync/atomic"
)

// minPercent is the GOGC the tuner never goes below: the Go default.
const minPercent = 100

// runtimeHeapMinimum is the runtime's floor under every heap goal at
// GOGC=100; it scales with GOGC (runtime/mgcpacer.go, defaultHeapMinimum).
const runtimeHeapMinimum = 4 << 20

// Tuner re-tunes GOGC after every GC cycle until Stop.
type Tuner struct {
	headroom uint64
	stopped  atomic.Bool
	paused   atomic.Bool
	cycles   atomic.Uint64 // cycles seen, for tests
	// resumeAfter, when not zero, is a count of completed GC cycles: the
	// first cycle past it resumes a paused tuner (ResumeOnNextCycle).
	resumeAfter atomic.Uint64
}

// Keep starts tuning GOGC so that each heap goal is at least the live heap
// plus headroom bytes. With GOGC in the environment it returns a stopped
// Tuner: every method is then a no-op.
func Keep(headroom uint64) *Tuner {
	t := &Tuner{headroom: headroom}
	if _, set := os.LookupEnv("GOGC"); set {
		t.stopped.Store(true)
		return t
	}
	t.tune()
	t.arm()
	return t
}

// Stop ends the tuning and restores GOGC to 100.
func (t *Tuner) Stop() {
	if t.stopped.Swap(true) {
		return
	}
	debug.SetGCPercent(minPercent)
}

// Pause puts GOGC back to 100 until Resume; the tuner keeps following the
// GC cycles meanwhile.
func (t *Tuner) Pause() {
	t.resumeAfter.Store(0)
	if t.stopped.Load() || t.paused.Swap(true) {
		return
	}
	debug.SetGCPercent(minPercent)
}

// Resume tunes GOGC again, from the live heap of the last cycle.
func (t *Tuner) Resume() {
	t.resumeAfter.Store(0)
	if t.stopped.Load() || !t.paused.Swap(false) {
		return
	}
	t.tune()
}

// ResumeOnNextCycle makes the next GC cycle to complete resume a paused
// tuner; the cycles completed before the call (the caller's own forced
// collections) do not. An idle program runs no collection, so the tuner
// stays paused until work brings garbage back, and resumes at the first
// collection of that burst, not at whatever poll the caller makes next
// (the daemon's is every 500 ms: a replay burst collected ten times at the
// runtime's 4 MiB minimum before it was seen).
func (t *Tuner) ResumeOnNextCycle() {
	if t.stopped.Load() {
		return
	}
	t.resumeAfter.Store(max(Cycles(), 1))
}

// arm allocates a sentinel whose cleanup runs once a GC cycle found it
// unreachable: then the cycle's live heap is known, and the cleanup tunes
// and arms the next sentinel.
func (t *Tuner) arm() {
	sentinel := new([16]byte)
	runtime.AddCleanup(sentinel, func(t *Tuner) {
		if t.stopped.Load() {
			return
		}
		t.cycles.Add(1)
		if n := t.resumeAfter.Load(); n != 0 && Cycles() > n {
			t.resumeAfter.Store(0)
			t.paused.Store(false) // tuned just below
		}
		t.tune()
		t.arm()
	}, t)
}

// tune sets GOGC from the live heap the last cycle marked.
func (t *Tuner) tune() {
	p := Percent(liveHeap(), t.headroom)
	if !t.stopped.Load() && !t.paused.Load() {
		debug.SetGCPercent(p)
	}
}

// Percent is the GOGC that puts the next heap goal near live + headroom.
// The goal is the larger of live × (1 + p/100) and the runtime's minimum,
// 4 MiB × p/100. The first term reaches live + headroom at
// p = headroom/live × 100; the minimum passes it at
// p = (live + headroom)/4 MiB × 100, so the smaller of the two is taken (for
// a live heap of 2 MiB and 8 MiB of headroom: 250, a goal of 10 MiB, where
// GOGC=400 would give 16). Never below 100.
func Percent(live, headroom uint64) int {
	byMinimum := (live + headroom) * 100 / runtimeHeapMinimum
	p := byMinimum
	if live > 0 {
		p = min(p, headroom*100/live)
	}
	return int(max(p, minPercent))
}

// Cycles is the number of GC cycles the runtime completed so far.
func Cycles() uint64 { return readMetric("/gc/cycles/total:gc-cycles") }

// liveHeap is the heap the last GC cycle marked live, in bytes.
func liveHeap() uint64 { return readMetric("/gc/heap/live:bytes") }

// readMetric reads one uint64 runtime metric; 0 if this Go has no such one.
func readMetric(name string) uint64 {
	s := []rtmetrics.Sample{{Name: name}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
