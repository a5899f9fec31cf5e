package journal

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func TestAppendReopenRoundTrip(t *testing.T) {
	for _, policy := range []SyncPolicy{SyncBatch, SyncAlways, SyncNone} {
		t.Run(policy.String(), func(t *testing.T) {
			path := journalPath(t)
			j := mustOpen(t, path, Options{Sync: policy})
			want := appendN(t, j, 20, "a", "b")
			want = append(want, mustAppend(t, j, Event{Type: TypeStartContainer, ID: "x", Incarnation: "inc-1"}))
			mustClose(t, j)

			j = mustOpen(t, path, Options{Sync: policy})
			defer mustClose(t, j)
			assertEvents(t, list(t, j.After(0, "")), want)
			assertOrdered(t, want)
			if want[0].Seq != 1 {
				t.Fatalf("first seq %d, want 1", want[0].Seq)
			}
			next := mustAppend(t, j, Event{Type: TypeOOM, ID: "a"})
			if next.Seq != uint64(len(want))+1 || !next.Timestamp.After(want[len(want)-1].Timestamp) {
				t.Fatalf("append after reopen: %+v", next)
			}
		})
	}
}

func mustAppend(t testing.TB, j *Journal, ev Event) Event {
	t.Helper()
	got, err := j.Append(ev)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	if err := j.Commit(); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	return got
}

// Within an epoch timestamps strictly increase; a clock far behind the last
// event (more than epochStepBack) starts a new epoch that follows the clock.
func TestTimestampsStrictlyIncrease(t *testing.T) {
	s := time.Second
	tests := []struct {
		name   string
		clock  []time.Time
		want   []time.Time
		epochs []uint32
	}{
		{"frozen clock", []time.Time{t0}, []time.Time{t0, t0.Add(1), t0.Add(2), t0.Add(3)}, []uint32{0, 0, 0, 0}},
		{"clock steps back a little", []time.Time{t0.Add(10 * s), t0.Add(7 * s), t0.Add(7 * s), t0.Add(20 * s), t0.Add(16 * s)},
			[]time.Time{t0.Add(10 * s), t0.Add(10*s + 1), t0.Add(10*s + 2), t0.Add(20 * s), t0.Add(20*s + 1)}, []uint32{0, 0, 0, 0, 0}},
		{"clock steps back far", []time.Time{t0.Add(time.Hour), t0, t0, t0.Add(s), t0.Add(-time.Hour)},
			[]time.Time{t0.Add(time.Hour), t0, t0.Add(1), t0.Add(s), t0.Add(-time.Hour)}, []uint32{0, 1, 1, 1, 2}},
		{"clock advances", []time.Time{t0, t0.Add(1), t0.Add(time.Hour)}, []time.Time{t0, t0.Add(1), t0.Add(time.Hour)}, []uint32{0, 0, 0}},
		{"local zone and monotonic reading", []time.Time{t0.In(time.FixedZone("X", 3600))}, []time.Time{t0, t0.Add(1)}, []uint32{0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := journalPath(t)
			j := mustOpen(t, path, Options{Now: (&fakeClock{times: tt.clock}).Now})
			got := appendN(t, j, len(tt.want))
			for i, ev := range got {
				if ev.Seq != uint64(i+1) || !ev.Timestamp.Equal(tt.want[i]) || ev.Epoch != tt.epochs[i] {
					t.Fatalf("event %d: seq %d ts %v epoch %d, want seq %d ts %v epoch %d", i, ev.Seq, ev.Timestamp, ev.Epoch, i+1, tt.want[i], tt.epochs[i])
				}
			}
			mustClose(t, j)
			j = mustOpen(t, path, Options{})
			defer mustClose(t, j)
			assertEvents(t, list(t, j.After(0, "")), got)
		})
	}
}

func TestSinceAndAfter(t *testing.T) {
	j := mustOpen(t, journalPath(t), Options{Now: frozen(t0)})
	defer mustClose(t, j)
	all := appendN(t, j, 12, "a", "b", "c")
	for k := range all {
		t.Run("resume from event "+all[k].Pid, func(t *testing.T) {
			assertEvents(t, list(t, j.Since(all[k].Timestamp, "")), all[k+1:])
			assertEvents(t, list(t, j.After(all[k].Seq, "")), all[k+1:])
			assertEvents(t, list(t, j.Since(all[k].Timestamp, "b")), onlyID(all[k+1:], "b"))
			assertEvents(t, list(t, j.After(all[k].Seq, "b")), onlyID(all[k+1:], "b"))
		})
	}
	t.Run("bounds", func(t *testing.T) {
		assertEvents(t, list(t, j.Since(time.Time{}, "")), all)
		assertEvents(t, list(t, j.Since(t0.Add(-1), "")), all)
		assertEvents(t, list(t, j.After(0, "")), all)
		assertEvents(t, list(t, j.Since(t0.Add(time.Hour), "")), nil)
		assertEvents(t, list(t, j.After(1000, "")), nil)
		assertEvents(t, list(t, j.Since(time.Time{}, "nobody")), nil)
	})
}

// SinceRetained serves what is on disk after t, past RetainCount; Since
// serves at most RetainCount.
func TestSinceRetained(t *testing.T) {
	j := mustOpen(t, journalPath(t), Options{Now: frozen(t0), RetainCount: 4})
	defer mustClose(t, j)
	all := appendN(t, j, 12, "a", "b", "c")
	for _, tc := range []struct {
		name       string
		after      time.Time
		id         string
		since, all []Event
	}{
		{"everything", time.Time{}, "", all[8:], all},
		{"after the 3rd", all[2].Timestamp, "", all[8:], all[3:]},
		{"after the 10th", all[9].Timestamp, "", all[10:], all[10:]},
		{"of one id", t0.Add(-1), "b", onlyID(all[8:], "b"), onlyID(all, "b")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assertEvents(t, list(t, j.Since(tc.after, tc.id)), tc.since)
			assertEvents(t, list(t, j.SinceRetained(tc.after, tc.id)), tc.all)
		})
	}
}

func onlyID(evs []Event, id string) []Event {
	var out []Event
	for _, ev := range evs {
		if ev.ID == id {
			out = append(out, ev)
		}
	}
	return out
}

func TestEmptyJournal(t *testing.T) {
	j := mustOpen(t, journalPath(t), Options{})
	defer mustClose(t, j)
	if seq, ts := j.Last(); seq != 0 || !ts.IsZero() || j.Len() != 0 {
		t.Fatalf("Last = %d %v, Len = %d", seq, ts, j.Len())
	}
	if n := len(list(t, j.Since(time.Time{}, ""))) + len(list(t, j.After(0, ""))) + len(list(t, j.After(0, "x"))); n != 0 {
		t.Fatalf("empty journal returned %d events", n)
	}
}

// Under every policy an event is visible to readers only after Commit: the
// loop publishes after Commit, so a subscriber registered in between must
// not get it from the replay and then again live.
func TestVisibilityFollowsCommit(t *testing.T) {
	for _, policy := range []SyncPolicy{SyncBatch, SyncAlways, SyncNone} {
		t.Run(policy.String(), func(t *testing.T) {
			j := mustOpen(t, journalPath(t), Options{Sync: policy})
			defer mustClose(t, j)
			for range 3 {
				if _, err := j.Append(Event{Type: TypePause, ID: "c"}); err != nil {
					t.Fatal(err)
				}
			}
			if seq, _ := j.Last(); j.Len() != 0 || seq != 0 || len(list(t, j.Since(time.Time{}, ""))) != 0 {
				t.Fatalf("before Commit Len = %d Last = %d", j.Len(), seq)
			}
			if err := j.Commit(); err != nil {
				t.Fatal(err)
			}
			if seq, _ := j.Last(); j.Len() != 3 || seq != 3 {
				t.Fatalf("after Commit Len = %d Last = %d", j.Len(), seq)
			}
		})
	}
}

func TestCommitSyncs(t *testing.T) {
	tests := []struct {
		policy                  SyncPolicy
		afterAppends, afterIdle uint64
	}{
		{SyncAlways, 5, 5},
		{SyncBatch, 1, 1},
		{SyncNone, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.policy.String(), func(t *testing.T) {
			j := mustOpen(t, journalPath(t), Options{Sync: tt.policy})
			for range 5 {
				if _, err := j.Append(Event{Type: TypeOOM, ID: "c"}); err != nil {
					t.Fatal(err)
				}
			}
			commitAndCheck(t, j, tt.afterAppends)
			commitAndCheck(t, j, tt.afterIdle) // nothing new: no fsync
			mustClose(t, j)
			if s := j.Stats(); s.Syncs != tt.afterIdle || s.Appended != 5 {
				t.Fatalf("after Close: %+v", s)
			}
		})
	}
}

func commitAndCheck(t *testing.T, j *Journal, wantSyncs uint64) {
	t.Helper()
	if err := j.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := j.Stats().Syncs; got != wantSyncs {
		t.Fatalf("Syncs = %d, want %d", got, wantSyncs)
	}
}

func TestParseSyncPolicy(t *testing.T) {
	tests := []struct {
		in   string
		want SyncPolicy
		err  bool
	}{
		{"always", SyncAlways, false},
		{"batch", SyncBatch, false},
		{"none", SyncNone, false},
		{" None ", SyncNone, false},
		{"", 0, true},
		{"fsync", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSyncPolicy(tt.in)
			if tt.err {
				if !errors.Is(err, ErrInvalidArgument) {
					t.Fatalf("err = %v, want ErrInvalidArgument", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %v, %v", got, err)
			}
			if back, _ := ParseSyncPolicy(got.String()); back != got {
				t.Fatalf("String round trip: %v -> %v", got, back)
			}
		})
	}
	if (Options{}).Sync != SyncBatch || SyncPolicy(9).String() != "SyncPolicy(9)" {
		t.Fatal("zero value must be SyncBatch; unknown values print their number")
	}
}

func TestOpenErrors(t *testing.T) {
	tests := []struct {
		name string
		path string
		opts Options
		is   error
	}{
		{"missing directory", filepath.Join(t.TempDir(), "no", "events.log"), Options{}, os.ErrNotExist},
		{"negative retain count", journalPath(t), Options{RetainCount: -1}, ErrInvalidArgument},
		{"unknown policy", journalPath(t), Options{Sync: SyncPolicy(7)}, ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Open(filepath.Dir(tt.path), tt.opts); !errors.Is(err, tt.is) {
				t.Fatalf("err = %v, want %v", err, tt.is)
			}
		})
	}
}

func TestFileMode(t *testing.T) {
	tests := []struct {
		name    string
		preMode os.FileMode // 0: file does not exist yet
	}{{"created", 0}, {"inherited from v0.2.9 as 0755", 0o755}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := journalPath(t)
			if tt.preMode != 0 {
				writeFile(t, path, nil)
				if err := os.Chmod(path, tt.preMode); err != nil {
					t.Fatal(err)
				}
			}
			mustClose(t, mustOpen(t, path, Options{}))
			fi, err := os.Stat(path)
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("mode %v, err %v", fi.Mode(), err)
			}
		})
	}
}

func TestClosed(t *testing.T) {
	j := mustOpen(t, journalPath(t), Options{})
	appendN(t, j, 2)
	mustClose(t, j)
	mustClose(t, j) // idempotent
	if _, err := j.Append(Event{Type: TypeOOM, ID: "c"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if j.Len() != 2 {
		t.Fatalf("reads after Close: Len = %d", j.Len())
	}
}

// Readers on other goroutines run while the writer appends and compacts;
// run with -race. Slices they got earlier must never change.
func TestConcurrentReadersSeeStableSlices(t *testing.T) {
	j := mustOpen(t, journalPath(t), Options{RetainCount: 50, Sync: SyncNone, segmentRecords: 16})
	defer mustClose(t, j)
	appendN(t, j, 60)
	held := list(t, j.After(0, ""))
	snapshot := append([]Event(nil), held...)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { readUntil(t, j, done) })
	}
	appendN(t, j, 2000, "a", "b")
	close(done)
	wg.Wait()
	assertEvents(t, held, snapshot)
	if j.Stats().RemovedSegments == 0 {
		t.Fatal("expected segments removed while readers ran")
	}
}

func readUntil(t *testing.T, j *Journal, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		default:
		}
		seq, ts := j.Last()
		all, err := Collect(j.After(0, ""))
		if errors.Is(err, ErrNotRetained) {
			continue // retention overtook this replay: it says so, never skips silently
		}
		if err != nil {
			t.Errorf("replay: %v", err)
			return
		}
		recent, err := Collect(j.Since(ts.Add(-1), ""))
		if errors.Is(err, ErrNotRetained) {
			continue
		}
		if err != nil {
			t.Errorf("replay: %v", err)
			return
		}
		_ = append(recent, Event{}) // must not write into the journal's array
		if !consistent(all, seq, 50) || len(recent) == 0 || recent[0].Seq < seq {
			t.Errorf("inconsistent read: last %d, %d events, recent from %v", seq, len(all), recent)
			return
		}
		_ = j.Stats()
	}
}

// consistent checks one snapshot: bounded, contiguous, and at least up to
// the last seq seen just before it was taken.
func consistent(evs []Event, lastSeen uint64, bound int) bool {
	if len(evs) == 0 || len(evs) > bound || evs[len(evs)-1].Seq < lastSeen {
		return false
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq != evs[i-1].Seq+1 || !evs[i].Timestamp.After(evs[i-1].Timestamp) {
			return false
		}
	}
	return true
}
