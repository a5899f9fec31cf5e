package supervisor

import (
	"context"
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/supervisor/journal"
)

// failingList is a runtime whose state dir cannot be listed: restore fails.
type failingList struct{ *fakeRuntime }

func (failingList) ListIDs(string) ([]string, error) {
	return nil, errors.New("state dir unreadable")
}

// blockingLoad is a runtime whose Load of every container hangs until
// release is closed; entered is closed when the first Load began.
type blockingLoad struct {
	*fakeRuntime
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (r *blockingLoad) Load(root, id string) (Container, error) {
	r.once.Do(func() { close(r.entered) })
	<-r.release
	return r.fakeRuntime.Load(root, id)
}

// stopWithin runs Stop and fails the test if it does not return in time
// (a Stop that hangs is the bug these tests look for).
func stopWithin(t *testing.T, s *Supervisor, limit time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.Stop() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("Stop did not return within %s", limit)
		return nil
	}
}

// wantClosed checks that Stop closed the journal and the monitor.
func wantClosed(t *testing.T, s *Supervisor, mon *fakeMonitor) {
	t.Helper()
	if _, err := s.journal.Append(journal.Event{Type: journal.TypeExit, ID: "x"}); !errors.Is(err, journal.ErrClosed) {
		t.Errorf("journal append after Stop: got %v, want ErrClosed", err)
	}
	select {
	case <-mon.closed:
	default:
		t.Error("the monitor was not closed by Stop")
	}
}

// TestStopAfterFailedStart: a daemon whose restore failed still stops,
// closing the journal (its last commit on disk) and the monitor.
func TestStopAfterFailedStart(t *testing.T) {
	mon := newFakeMonitor()
	s, err := New(Config{StateDir: t.TempDir(), RuntimeImpl: failingList{newFakeRuntime()}, MonitorImpl: mon,
		Clock: newFakeClock(), ReconcileInterval: time.Minute})
	must(t, err)
	if err := s.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "state dir unreadable") {
		t.Fatalf("Start: got %v, want the restore's error", err)
	}
	if err := stopWithin(t, s, 5*time.Second); err != nil {
		t.Errorf("Stop after a failed Start: %v", err)
	}
	wantClosed(t, s, mon)
	if err := stopWithin(t, s, 5*time.Second); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := s.Start(context.Background()); !errors.Is(err, ErrStopped) {
		t.Errorf("Start after Stop: got %v, want ErrStopped", err)
	}
}

// TestStopDuringRestore: a stop signal while restore is in progress (Stop on
// another goroutine than Start, as the daemon does) ends the restore, Start
// returns ErrStopped without starting the loop, and everything is closed.
// Under -race this also shows Start and Stop share no unguarded field.
func TestStopDuringRestore(t *testing.T) {
	rt := &blockingLoad{fakeRuntime: newFakeRuntime(), entered: make(chan struct{}), release: make(chan struct{})}
	defer close(rt.release)
	if _, err := rt.New(runtime.ContainerOpts{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	mon := newFakeMonitor()
	s, err := New(Config{StateDir: t.TempDir(), RuntimeImpl: rt, MonitorImpl: mon, Clock: newFakeClock(),
		ReconcileInterval: time.Minute})
	must(t, err)
	started := make(chan error, 1)
	go func() { started <- s.Start(context.Background()) }()
	select {
	case <-rt.entered:
	case err := <-started:
		t.Fatalf("Start returned before restore loaded anything: %v", err)
	}
	if err := stopWithin(t, s, 5*time.Second); err != nil {
		t.Errorf("Stop during restore: %v", err)
	}
	if err := <-started; !errors.Is(err, ErrStopped) {
		t.Errorf("Start cut short by Stop: got %v, want ErrStopped", err)
	}
	wantClosed(t, s, mon)
	rt.mu.Lock()
	_, kept := rt.live["a"]
	rt.mu.Unlock()
	if !kept {
		t.Error("the container whose load Stop cut short was set aside; it must stay for the next start")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.State(ctx, ""); !errors.Is(err, ErrStopped) {
		t.Errorf("State after Stop: got %v, want ErrStopped", err)
	}
}

// entryWaiter is a logrus hook that hands over the entries whose message
// holds a given text.
type entryWaiter struct {
	text string
	ch   chan *logrus.Entry
}

func (h *entryWaiter) Levels() []logrus.Level { return logrus.AllLevels }

func (h *entryWaiter) Fire(e *logrus.Entry) error {
	if strings.Contains(e.Message, h.text) {
		select {
		case h.ch <- e:
		default:
		}
	}
	return nil
}

func (h *entryWaiter) wait(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		select {
		case <-h.ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("no log entry %q within 5s", h.text)
		}
	}
}

// cpuTime is the CPU time (user + system) this process used so far.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestMonitorChannelsClosed: when the monitor stops (its channels close, as
// monitor.Monitor's do when epoll_wait fails), the loop says so once and
// goes on serving requests without spinning on the closed channels (the
// OOM channel, closed first, is not logged).
func TestMonitorChannelsClosed(t *testing.T) {
	logger := logrus.New()
	logger.SetOutput(discard{})
	hook := &entryWaiter{text: "the exit monitor stopped", ch: make(chan *logrus.Entry, 4)}
	logger.AddHook(hook)
	mon := newFakeMonitor()
	s, err := New(Config{StateDir: t.TempDir(), RuntimeImpl: newFakeRuntime(), MonitorImpl: mon, Clock: newFakeClock(),
		ReconcileInterval: time.Minute, Logger: logrus.NewEntry(logger)})
	must(t, err)
	must(t, s.Start(context.Background()))
	defer s.Stop()
	close(mon.ooms)
	close(mon.exits)
	hook.wait(t, 1)

	// A spinning loop burns a whole core: about as much CPU as wall time.
	// An idle one burns next to nothing.
	const window = 300 * time.Millisecond
	cpu0, wall0 := cpuTime(t), time.Now()
	time.Sleep(window) // a measurement window, not a synchronisation
	cpu, wall := cpuTime(t)-cpu0, time.Since(wall0)
	if cpu > wall/3 {
		t.Errorf("the process used %s of CPU in %s of idle time: the loop spins on the closed channels", cpu, wall)
	}
	select {
	case <-hook.ch:
		t.Error("the closed exit channel was logged more than once")
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.State(ctx, ""); err != nil {
		t.Errorf("State with the monitor gone: %v", err)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
