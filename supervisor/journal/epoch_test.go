package journal

import (
	"fmt"
	"testing"
	"time"
)

// A clock that jumps forward then back (a bad RTC at boot corrected by NTP)
// or steps back far must neither pin later timestamps nor break "events
// since T", live, after a restart and after a compaction that drops the
// older epochs' first events.
func TestClockJumpsAcrossEpochs(t *testing.T) {
	const filler = 100 // old events, compacted away in the reopened journal
	y, h, s := 365*24*time.Hour, time.Hour, time.Second
	tests := []struct {
		name    string
		clock   []time.Time
		epochs  []uint32
		queries map[time.Time][]int // Since(T) -> indexes into clock
	}{
		{
			name:   "future-stamped event then the right time",
			clock:  []time.Time{t0.Add(-s), t0.Add(y), t0, t0.Add(s), t0.Add(2 * s)},
			epochs: []uint32{0, 0, 1, 1, 1},
			queries: map[time.Time][]int{
				t0.Add(-10 * time.Minute): {0, 1, 2, 3, 4}, // the future event had happened by t0
				t0.Add(s / 2):             {3, 4},          // not pinned: later events follow the clock
				t0.Add(y):                 {2, 3, 4},       // resume after the future event itself
				t0.Add(y + s):             nil,             // no event is (effectively) after it
				t0.Add(2 * s):             nil,
			},
		},
		{
			name:   "clock steps back an hour",
			clock:  []time.Time{t0, t0.Add(s), t0.Add(2 * s), t0.Add(-h), t0.Add(-h + s)},
			epochs: []uint32{0, 0, 0, 1, 1},
			queries: map[time.Time][]int{
				t0.Add(-h - time.Minute): {0, 1, 2, 3, 4},
				t0.Add(-h + s/2):         {4},        // capped: the old epoch ended by t0-1h
				t0.Add(s):                {2, 3, 4},  // exact resume inside the old epoch
				t0.Add(2 * s):            {3, 4},     // exact resume at its last event
				t0.Add(-h):               {4},        // exact resume in the new epoch
				t0.Add(h):                []int(nil), // nothing is later than an hour ahead
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := journalPath(t)
			clock := []time.Time{t0.Add(-2 * h)}
			for range filler - 1 {
				clock = append(clock, t0.Add(-2*h))
			}
			// Segments of 2: the epochs' events lie in sealed segments too.
			j := mustOpen(t, path, Options{segmentRecords: 2, Now: (&fakeClock{times: append(clock, tt.clock...)}).Now})
			appendN(t, j, filler)
			evs := appendN(t, j, len(tt.clock))
			for i, ev := range evs {
				if ev.Epoch != tt.epochs[i] {
					t.Fatalf("event %d: epoch %d, want %d", i, ev.Epoch, tt.epochs[i])
				}
			}
			checkSince(t, "live", j, evs, tt.queries)
			mustClose(t, j)
			j = mustOpen(t, path, Options{segmentRecords: 2})
			checkSince(t, "reopened", j, evs, tt.queries)
			mustClose(t, j)
			j = mustOpen(t, path, Options{segmentRecords: 2, RetainCount: len(tt.clock)})
			defer mustClose(t, j)
			if j.Stats().RemovedSegments < filler/2-2 || j.Len() != len(tt.clock) {
				t.Fatalf("reopen with retain count: %d segments removed, %d events", j.Stats().RemovedSegments, j.Len())
			}
			checkSince(t, "compacted", j, evs, tt.queries)
		})
	}
}

func checkSince(t *testing.T, when string, j *Journal, evs []Event, queries map[time.Time][]int) {
	t.Helper()
	for q, idx := range queries {
		got := list(t, j.Since(q, ""))
		var want []Event
		for _, i := range idx {
			want = append(want, evs[i])
		}
		if len(got) != len(want) {
			t.Fatalf("%s: Since(%v) returned %s, want %s", when, q, seqs(got), seqs(want))
		}
		assertEvents(t, got, want)
	}
}

func seqs(evs []Event) string {
	var out []uint64
	for _, ev := range evs {
		out = append(out, ev.Seq)
	}
	return fmt.Sprint(out)
}
