package supervisor

import (
	"testing"
	"time"

	metrics "github.com/rcrowley/go-metrics"
)

// TestTimerSumsItsWholeLife: past the 1028 values go-metrics' sample keeps,
// a supervisor timer's Sum still covers every value, as its Count does, so
// the Prometheus summary's _sum and _count never go down.
func TestTimerSumsItsWholeLife(t *testing.T) {
	r := metrics.NewRegistry()
	tm := registerTimer("x-time", r)
	const n = 3000
	for range n {
		tm.Update(time.Millisecond)
	}
	if tm.Count() != n || tm.Sum() != n*int64(time.Millisecond) {
		t.Fatalf("count %d sum %d, want %d and %d", tm.Count(), tm.Sum(), n, n*int64(time.Millisecond))
	}
	if p := tm.Snapshot().Percentile(0.5); p != float64(time.Millisecond) {
		t.Fatalf("median %v, want 1ms", p)
	}
	if registerTimer("x-time", r) != tm {
		t.Fatal("a second registration must return the registered timer")
	}
}
