package monitor

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/evjournal/containerd/integration/fixture"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { fixture.Main(m) }

// waitLimit bounds every wait for an event that should come.
const waitLimit = 10 * time.Second

// fdSource is an ExitSource for a bare fd.
type fdSource int

func (f fdSource) ExitFD() int { return int(f) }

// scopedSource is an exit source living in the memory cgroup watched as id.
type scopedSource struct {
	fd int
	id string
}

func (s scopedSource) ExitFD() int   { return s.fd }
func (s scopedSource) OOMID() string { return s.id }

// newMonitor makes a Monitor closed at the end of the test, logging to t.
func newMonitor(t testing.TB, opts ...Option) *Monitor {
	t.Helper()
	m, err := New(append([]Option{WithLogger(testLogger(t))}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// testLogger sends the monitor's log lines to t.Log, at debug level, so
// they show with the test that caused them.
func testLogger(t testing.TB) *logrus.Entry {
	l := logrus.New()
	l.SetOutput(testWriter{t})
	l.SetLevel(logrus.DebugLevel)
	return logrus.NewEntry(l)
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// withV2File makes v2 watches read another file than memory.events, so the
// removal path can be tried on a cgroup2 mount without the memory controller.
func withV2File(name string) Option {
	return func(m *Monitor) { m.v2File = name }
}

// pipe returns a pipe as raw fds (the read end non-blocking, as the runtime
// opens exit FIFOs). Raw fds keep the Go poller out, so fd counts are exact.
func pipe(t testing.TB) (r, w int) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatalf("pipe2: %v", err)
	}
	if err := unix.SetNonblock(p[0], true); err != nil {
		t.Fatal(err)
	}
	return p[0], p[1]
}

// closeFD closes a fd the test owns; EBADF would mean someone else closed it.
func closeFD(t testing.TB, fd int) {
	t.Helper()
	if err := unix.Close(fd); err != nil {
		t.Errorf("close fd %d: %v", fd, err)
	}
}

// countFDs counts this process's open fds.
func countFDs(t testing.TB) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// waitFor polls cond (for states that no channel announces, like Count).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", waitLimit, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// next receives the next report of either kind, as "oom:<id>" or
// "exit:<fd>", failing after waitLimit.
func next(t testing.TB, m *Monitor) string {
	t.Helper()
	select {
	case id, ok := <-m.OOMs():
		if !ok {
			t.Fatal("OOMs() closed")
		}
		return "oom:" + id
	case p, ok := <-m.Exits():
		if !ok {
			t.Fatal("Exits() closed")
		}
		return fmt.Sprintf("exit:%d", p.ExitFD())
	case <-time.After(waitLimit):
		t.Fatalf("no report within %v (sources registered: %d)", waitLimit, m.Count())
	}
	return ""
}

// expect receives len(want) reports and checks they come in that order.
func expect(t testing.TB, m *Monitor, want ...string) {
	t.Helper()
	for i, w := range want {
		if got := next(t, m); got != w {
			t.Fatalf("report %d: got %s, want %s (expected sequence %v)", i, got, w, want)
		}
	}
}

func exitName(fd int) string { return fmt.Sprintf("exit:%d", fd) }
