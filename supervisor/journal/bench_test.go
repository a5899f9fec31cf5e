package journal

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkAppend measures one Append per policy. For SyncBatch it commits
// every 32 appends, the group commit the loop does per batch.
func BenchmarkAppend(b *testing.B) {
	for _, policy := range []SyncPolicy{SyncAlways, SyncBatch, SyncNone} {
		b.Run(policy.String(), func(b *testing.B) {
			j := mustOpen(b, journalPath(b), Options{Sync: policy, RetainCount: 10000})
			defer mustClose(b, j)
			ev := Event{Type: TypeExit, ID: "bench-container", Pid: "init", Status: 137}
			n := 0
			for b.Loop() {
				if _, err := j.Append(ev); err != nil {
					b.Fatal(err)
				}
				if n++; n%32 == 0 {
					if err := j.Commit(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkSinceLast100Of1M: replay of the last 100 events of 1,000,000
// retained ones, built through the public API. Only the Since call is timed.
func BenchmarkSinceLast100Of1M(b *testing.B) {
	const total = 1_000_000
	j := mustOpen(b, journalPath(b), Options{Sync: SyncNone})
	defer mustClose(b, j)
	ev := Event{Type: TypeExit, ID: "c", Pid: "init"}
	for i := range total {
		if _, err := j.Append(ev); err != nil {
			b.Fatal(err)
		}
		if i%1000 == 999 {
			if err := j.Commit(); err != nil {
				b.Fatal(err)
			}
		}
	}
	from := list(b, j.After(total-101, ""))[0].Timestamp
	for b.Loop() {
		if got := list(b, j.Since(from, "")); len(got) != 100 {
			b.Fatalf("got %d events", len(got))
		}
	}
}

// BenchmarkFullReplay streams every event of a 200,000-event journal built
// with Build (segments, indexes), as a full replay does.
func BenchmarkFullReplay(b *testing.B) {
	dir := b.TempDir()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n, err := Build(dir, func(yield func(Event) bool) {
		for i := 0; i < 200000; i++ {
			if !yield(Event{Type: TypeExit, ID: fmt.Sprintf("container-%04d", i%1000), Pid: "init", Status: 137, Incarnation: "1700000000000000000", Timestamp: base.Add(time.Duration(i) * time.Microsecond)}) {
				return
			}
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	j := mustOpen(b, filepath.Join(dir, fileName), Options{})
	defer j.Close()
	for b.Loop() {
		r := j.After(0, "")
		c := 0
		for {
			if _, err := r.Next(); err != nil {
				break
			}
			c++
		}
		if c != n {
			b.Fatal(c)
		}
	}
}
