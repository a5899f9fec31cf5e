package journal

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
)

// t0 is a fixed instant for fake clocks.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeClock returns its times in turn, then repeats the last one forever.
// Only the writer goroutine calls it, so it needs no lock.
type fakeClock struct {
	times []time.Time
	i     int
}

func (c *fakeClock) Now() time.Time {
	t := c.times[min(c.i, len(c.times)-1)]
	c.i++
	return t
}

// frozen is a clock stuck at one instant: every event shares a wall time.
func frozen(t time.Time) func() time.Time {
	return (&fakeClock{times: []time.Time{t}}).Now
}

// quietLogger keeps test output clean and lets tests inspect warnings.
func quietLogger() (*logrus.Entry, *logtest.Hook) {
	l, hook := logtest.NewNullLogger()
	return logrus.NewEntry(l), hook
}

// journalPath returns the first segment of a new journal directory; tests
// open filepath.Dir of it and read or damage the segment itself. Until it is
// sealed it is the active segment, which holds every event.
func journalPath(t testing.TB) string {
	return filepath.Join(t.TempDir(), segName(1, segLog))
}

// list reads a replay to its end.
func list(t testing.TB, r *Replay) []Event {
	t.Helper()
	evs, err := Collect(r)
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	return evs
}

func mustOpen(t testing.TB, path string, opts Options) *Journal {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger, _ = quietLogger()
	}
	j, err := Open(filepath.Dir(path), opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	return j
}

func mustClose(t testing.TB, j *Journal) {
	t.Helper()
	if err := j.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// appendN appends n events for ids a0, a1, ... (cycling over ids) and commits
// after each, as the loop would, returning the stored events.
func appendN(t testing.TB, j *Journal, n int, ids ...string) []Event {
	t.Helper()
	if len(ids) == 0 {
		ids = []string{"c"}
	}
	out := make([]Event, 0, n)
	for i := range n {
		ev, err := j.Append(Event{Type: TypeExit, ID: ids[i%len(ids)], Pid: fmt.Sprint(i), Status: uint32(i % 256)})
		if err != nil {
			t.Fatalf("Append #%d: %v", i, err)
		}
		if err := j.Commit(); err != nil {
			t.Fatalf("Commit #%d: %v", i, err)
		}
		out = append(out, ev)
	}
	return out
}

// abandon drops j as a killed process would: no commit, no more writes.
func abandon(j *Journal) {
	j.active.file.Close()
}

func sameEvent(a, b Event) bool {
	return a.Type == b.Type && a.ID == b.ID && a.Pid == b.Pid && a.Status == b.Status &&
		a.Timestamp.Equal(b.Timestamp) && a.Seq == b.Seq && a.Incarnation == b.Incarnation && a.Epoch == b.Epoch
}

func assertEvents(t testing.TB, got, want []Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	for i := range want {
		if !sameEvent(got[i], want[i]) {
			t.Fatalf("event %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

// assertOrdered checks the invariants every retained sequence keeps: seq
// contiguous and timestamps strictly increasing.
func assertOrdered(t testing.TB, evs []Event) {
	t.Helper()
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq != evs[i-1].Seq+1 {
			t.Fatalf("seq gap or repeat at %d: %d after %d", i, evs[i].Seq, evs[i-1].Seq)
		}
		if evs[i].Epoch == evs[i-1].Epoch && !evs[i].Timestamp.After(evs[i-1].Timestamp) {
			t.Fatalf("timestamp not increasing at %d: %v after %v", i, evs[i].Timestamp, evs[i-1].Timestamp)
		}
	}
}

// assertCleanFile checks that every line of the file decodes.
func assertCleanFile(t testing.TB, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Fatalf("file does not end with a newline: %q", tail(data))
	}
	for i, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		if len(data) == 0 {
			break
		}
		if _, err := decodeLine(line); err != nil {
			t.Fatalf("line %d %q: %v", i, line, err)
		}
	}
}

func tail(b []byte) []byte {
	return b[max(0, len(b)-40):]
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// decodeLine decodes one record with a fresh decoder (decoder.decode).
func decodeLine(line []byte) (Event, error) {
	var d decoder
	return d.decode(line)
}
