package monitor

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"
)

// 500 sources at once: each exit reported exactly once, no goroutine per
// source, and every fd accounted for afterwards.
func TestManyExits(t *testing.T) {
	const n = 500
	countFDs(t) // the first ReadDir may set up the Go poller: keep it out of the baseline
	fdsBefore := countFDs(t)
	m := newMonitor(t)
	fdsWithMonitor := countFDs(t)
	goroutines := runtime.NumGoroutine()

	reads, writes := make([]int, n), make([]int, n)
	for i := range n {
		reads[i], writes[i] = pipe(t)
		if err := m.Monitor(fdSource(reads[i])); err != nil {
			t.Fatalf("Monitor(%d): %v", i, err)
		}
	}
	if got := m.Count(); got != n {
		t.Fatalf("Count after registering %d sources = %d", n, got)
	}
	if grown := runtime.NumGoroutine() - goroutines; grown > 0 {
		t.Fatalf("registering %d sources started %d goroutines; the monitor must use none per source", n, grown)
	}

	closeShuffled(t, writes, 4)
	seen := receiveExits(t, m, n)
	for _, fd := range reads {
		if seen[fd] != 1 {
			t.Errorf("fd %d reported %d times, want once", fd, seen[fd])
		}
		closeFD(t, fd) // the monitor must not have closed it
	}
	if got := m.Count(); got != 0 {
		t.Errorf("Count after every exit = %d, want 0", got)
	}
	if got := countFDs(t); got != fdsWithMonitor {
		t.Errorf("open fds after the exits = %d, want %d (monitor's baseline)", got, fdsWithMonitor)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := countFDs(t); got != fdsBefore {
		t.Errorf("open fds after Close = %d, want %d (before New)", got, fdsBefore)
	}
}

// closeShuffled closes fds in random order from several goroutines at once.
func closeShuffled(t *testing.T, fds []int, workers int) {
	order := rand.Perm(len(fds))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(order); i += workers {
				closeFD(t, fds[order[i]])
			}
		})
	}
	t.Cleanup(wg.Wait)
}

// receiveExits receives n exits and counts them by fd, failing on an OOM or
// when they stop coming.
func receiveExits(t *testing.T, m *Monitor, n int) map[int]int {
	seen := map[int]int{}
	for range n {
		select {
		case p := <-m.Exits():
			seen[p.ExitFD()]++
		case id := <-m.OOMs():
			t.Fatalf("unexpected OOM report %q", id)
		case <-time.After(waitLimit):
			t.Fatalf("only %d of %d exits reported within %v", len(seen), n, waitLimit)
		}
	}
	return seen
}

// Close must stop a loop that is blocked sending to nobody, and close both
// channels.
func TestCloseWhileBlockedOnSend(t *testing.T) {
	m := newMonitor(t)
	r, w := pipe(t)
	defer closeFD(t, r)
	if err := m.Monitor(fdSource(r)); err != nil {
		t.Fatal(err)
	}
	closeFD(t, w)
	// The source leaves the registry before its report is sent, so Count 0
	// means the loop now waits on the unreceived send.
	waitFor(t, "the exit to be taken out of the set", func() bool { return m.Count() == 0 })

	closed := make(chan error)
	go func() { closed <- m.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("Close did not return while the loop was blocked on a send")
	}
	if _, ok := <-m.Exits(); ok {
		t.Error("Exits() still open after Close")
	}
	if _, ok := <-m.OOMs(); ok {
		t.Error("OOMs() still open after Close")
	}
}

func TestRegistrationErrors(t *testing.T) {
	m := newMonitor(t)
	r, w := pipe(t)
	defer closeFD(t, r)
	defer closeFD(t, w)
	if err := m.Monitor(fdSource(r)); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"nil source", m.Monitor(nil), ErrInvalid},
		{"negative fd", m.Monitor(fdSource(-1)), ErrInvalid},
		{"same fd twice", m.Monitor(fdSource(r)), ErrExists},
		{"OOM without id", m.MonitorOOM(OOMSource{V1Dir: "/x"}), ErrInvalid},
		{"OOM without dir", m.MonitorOOM(OOMSource{ID: "a"}), ErrInvalid},
		{"OOM with both dirs", m.MonitorOOM(OOMSource{ID: "a", V1Dir: "/x", V2Dir: "/y"}), ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !errors.Is(c.err, c.want) {
				t.Errorf("got %v, want %v", c.err, c.want)
			}
		})
	}
	if got := m.Count(); got != 1 {
		t.Errorf("failed registrations changed Count: %d, want 1", got)
	}
	m.Close()
	if err := m.Monitor(fdSource(w)); !errors.Is(err, ErrClosed) {
		t.Errorf("Monitor after Close: got %v, want ErrClosed", err)
	}
	if err := m.MonitorOOM(OOMSource{ID: "a", V2Dir: t.TempDir()}); !errors.Is(err, ErrClosed) {
		t.Errorf("MonitorOOM after Close: got %v, want ErrClosed", err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
