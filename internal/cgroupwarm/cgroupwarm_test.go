package cgroupwarm

import (
	"errors"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
)

// fakeWarmer writes nowhere: each write is reported on writes; exits on
// exited.
type fakeWarmer struct {
	*Warmer
	writes chan string
	exited chan struct{}
	mu     sync.Mutex
	active int // writes in progress at once
	most   int
}

func newFake(t *testing.T, writeErr error) *fakeWarmer {
	f := &fakeWarmer{writes: make(chan string, 1000), exited: make(chan struct{}, 10)}
	f.Warmer = &Warmer{
		procsFile: func() (string, error) { return "/fake/cgroup.procs", nil },
		open: func(path string) (io.WriteCloser, error) {
			return fakeFile{f: f, path: path, err: writeErr}, nil
		},
		period: time.Millisecond,
		log:    logrus.NewEntry(logrus.New()),
		exited: func() { f.exited <- struct{}{} },
	}
	return f
}

// fakeFile is an open fake cgroup.procs.
type fakeFile struct {
	f    *fakeWarmer
	path string
	err  error
}

func (ff fakeFile) Write(data []byte) (int, error) {
	f := ff.f
	f.mu.Lock()
	f.active++
	f.most = max(f.most, f.active)
	f.mu.Unlock()
	f.writes <- ff.path + " " + string(data)
	f.mu.Lock()
	f.active--
	f.mu.Unlock()
	return len(data), ff.err
}

func (fakeFile) Close() error { return nil }

func (f *fakeWarmer) await(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case w := <-f.writes:
			if want := "/fake/cgroup.procs " + itoa(os.Getpid()); w != want {
				t.Fatalf("wrote %q, want %q (our own pid, to our own cgroup)", w, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no write while held")
		}
	}
}

func (f *fakeWarmer) awaitExit(t *testing.T) {
	t.Helper()
	select {
	case <-f.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the writer goes on after every holder released")
	}
}

func itoa(n int) string {
	b := []byte{}
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// While held the Warmer writes our pid to our cgroup's cgroup.procs again
// and again; once released it stops, and a new hold starts it again.
func TestHoldWritesUntilReleased(t *testing.T) {
	f := newFake(t, nil)
	release := f.Hold()
	f.await(t, 5)
	release()
	release() // a second call is a no-op
	f.awaitExit(t)
	for len(f.writes) > 0 {
		<-f.writes
	}
	f.mu.Lock()
	holders := f.holders
	f.mu.Unlock()
	if holders != 0 {
		t.Fatalf("holders = %d after every release", holders)
	}
	select {
	case w := <-f.writes:
		t.Fatalf("wrote %q with no holder", w)
	default:
	}
	release = f.Hold()
	f.await(t, 2)
	release()
	f.awaitExit(t)
}

// Concurrent holders share one writer: never two writes at once.
func TestHoldersShareOneWriter(t *testing.T) {
	f := newFake(t, nil)
	var releases []func()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range quietAbove {
		wg.Go(func() {
			r := f.Hold()
			mu.Lock()
			releases = append(releases, r)
			mu.Unlock()
		})
	}
	wg.Wait()
	f.await(t, 10)
	for _, r := range releases {
		r()
	}
	f.awaitExit(t)
	if f.most != 1 {
		t.Fatalf("%d writes at once, want 1", f.most)
	}
	select {
	case <-f.exited:
		t.Fatal("more than one writer ran")
	default:
	}
}

// With more starts under way than quietAbove (their own runc writes keep
// the lock ready) the writer writes nothing, and writes again once they
// are fewer.
func TestQuietWhileManyStarts(t *testing.T) {
	f := newFake(t, nil)
	turns := make(chan struct{}, 100)
	f.turned = func() {
		select {
		case turns <- struct{}{}:
		default:
		}
	}
	var releases []func()
	for range quietAbove + 1 {
		releases = append(releases, f.Hold())
	}
	// The turns done by now, and the one under way, may have seen fewer
	// holders: count from the turns after them.
	for range len(turns) + 1 {
		<-turns
	}
	for len(f.writes) > 0 {
		<-f.writes
	}
	for range 5 {
		select {
		case <-turns:
		case <-time.After(10 * time.Second):
			t.Fatal("the writer stopped turning while held")
		}
	}
	if n := len(f.writes); n > 0 {
		t.Fatalf("%d writes with %d starts under way, want none", n, quietAbove+1)
	}
	releases[0]()
	f.await(t, 2)
	for _, r := range releases[1:] {
		r()
	}
	f.awaitExit(t)
}

// A failed write (no permission, an unknown cgroup) turns the Warmer off:
// holds cost nothing after it.
func TestFailedWriteTurnsItOff(t *testing.T) {
	f := newFake(t, errors.New("permission denied"))
	release := f.Hold()
	f.await(t, 1)
	f.awaitExit(t)
	release()
	f.Hold()()
	select {
	case w := <-f.writes:
		t.Fatalf("wrote %q after a failed write", w)
	case <-f.exited:
		t.Fatal("a writer started after a failed write")
	default:
	}
}

// On the real kernel (root): held for a while, the Warmer leaves this
// process in the cgroups it was in, and stays on (its writes succeed).
func TestRealWritesMoveNothing(t *testing.T) {
	if os.Getuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI runs as root")
		}
		t.Skip("needs root to write cgroup.procs")
	}
	before, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	path, err := OwnProcsFile()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("own cgroup.procs: %v", err)
	}
	exited := make(chan struct{}, 1)
	turns := make(chan struct{}, 100)
	w := New(logrus.NewEntry(logrus.New()))
	w.exited = func() { exited <- struct{}{} }
	w.turned = func() { turns <- struct{}{} }
	release := w.Hold()
	for range 3 {
		select {
		case <-turns:
		case <-exited:
			t.Fatal("a write to our own cgroup.procs failed: the writer stopped while held")
		case <-time.After(10 * time.Second):
			t.Fatal("no turn of the writer in 10 s")
		}
	}
	w.mu.Lock()
	n, off := w.writes, w.off
	w.mu.Unlock()
	if off || n < 3 {
		t.Fatalf("%d writes in 3 turns (off: %v), want 3", n, off)
	}
	release()
	<-exited
	after, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) {
		t.Fatalf("the warm-up moved us:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
