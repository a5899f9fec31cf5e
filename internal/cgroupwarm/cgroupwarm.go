// Package cgroupwarm keeps the kernel's cgroup migration lock ready while
// container processes start, so that runc's cgroup joins do not wait for
// an RCU grace period.
//
// runc joins each process it starts to the container's cgroups by writing
// the pid to cgroup.procs. Every such write takes the kernel's cgroup
// threadgroup lock (a percpu rwsem) as a writer. The first writer after a
// quiet spell waits for an RCU grace period while the lock moves its
// readers to their slow path; writers that come while the lock is in that
// state, or within a grace period or two after the last one left, do not
// wait. On this project's test machines the first write took 5 to 14 ms and
// the next ones 0.02 ms: most of a `runc exec` that is not CPU, on cgroup v1
// and on cgroup v2 mounted without favordynmods (which keeps the lock in
// that state for good).
//
// A Warmer, while held, writes the daemon's own pid to the cgroup.procs of
// the cgroup it is already in, every Period: a migration that moves
// nothing, but takes the lock as a writer. The first write pays the grace
// period beside runc's own start-up instead of in front of runc's first
// cgroup write, and the next ones keep the lock ready until runc is done.
// One Warmer serves every start under way: holders share its writer, so
// twenty concurrent starts cost what one does.
package cgroupwarm

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/opencontainers/cgroups"
	"github.com/sirupsen/logrus"
)

// Period is how often a held Warmer writes. A grace period here is about
// 8 ms, and the lock stays ready for at least one after a write: a write
// every 2 ms keeps it ready throughout.
const Period = 2 * time.Millisecond

// Warmer is the shared writer; the zero value is not usable, see New.
type Warmer struct {
	procsFile func() (string, error)                    // the cgroup.procs to write, looked up per session
	open      func(path string) (io.WriteCloser, error) // opens it for writing
	period    time.Duration
	log       *logrus.Entry
	exited    func() // called when the writer goroutine ends (tests)
	turned    func() // called after each turn of the writer (tests)

	mu      sync.Mutex
	holders int  // guarded by mu
	running bool // guarded by mu: a writer goroutine is on
	off     bool // guarded by mu: a write failed; the Warmer does nothing more
	writes  int  // guarded by mu: writes done, for tests
}

// New returns a Warmer of the daemon's own cgroup.
func New(log *logrus.Entry) *Warmer {
	return &Warmer{procsFile: OwnProcsFile, open: openFile, period: Period, log: log}
}

// Hold keeps the lock ready until release is called (once).
func (w *Warmer) Hold() (release func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.off {
		return func() {}
	}
	w.holders++
	if !w.running {
		w.running = true
		go w.run()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			w.holders--
			w.mu.Unlock()
		})
	}
}

// quietAbove: with more starts than this under way, their own runc
// writes keep the lock ready, and the Warmer's would only add to the
// traffic on the cgroup lock, which every fork and exit on the host takes.
const quietAbove = 2

// lookupEvery is how many writes go to one looked-up path.
const lookupEvery = 50

// run writes while there are holders. The path is looked up at the start
// of each session and every lookupEvery writes (100 ms): the daemon may
// have been moved (by its service manager, say) since, and it must be
// written where it is now, or the write would move it back.
func (w *Warmer) run() {
	if w.exited != nil {
		defer w.exited()
	}
	pid := []byte(strconv.Itoa(os.Getpid()))
	var (
		path string
		f    io.WriteCloser
		err  error
	)
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for n := 0; ; n++ {
		if n%lookupEvery == 0 {
			// Kept open between lookups: a write is then one syscall.
			var now string
			if now, err = w.procsFile(); err == nil && (f == nil || now != path) {
				if f != nil {
					f.Close()
				}
				path = now
				f, err = w.open(path)
			}
		}
		w.mu.Lock()
		busy := w.holders > quietAbove
		w.mu.Unlock()
		if err == nil && !busy {
			_, err = f.Write(pid)
		}
		w.mu.Lock()
		if err != nil {
			w.off, w.running = true, false
			w.mu.Unlock()
			w.log.WithError(err).Info("cgroup join warm-up is off: container starts may wait for the kernel's cgroup lock (one RCU grace period each)")
			return
		}
		if !busy {
			w.writes++
		}
		if w.holders == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		if w.turned != nil {
			w.turned()
		}
		time.Sleep(w.period)
	}
}

// OwnProcsFile is the cgroup.procs of the cgroup this process is in: on
// the unified hierarchy when the host has only that one, else on a v1
// hierarchy's (the lock is the same for all).
func OwnProcsFile() (string, error) {
	if cgroups.IsCgroup2UnifiedMode() {
		m, err := cgroups.ParseCgroupFile("/proc/self/cgroup")
		if err != nil {
			return "", err
		}
		return filepath.Join("/sys/fs/cgroup", m[""], "cgroup.procs"), nil
	}
	var firstErr error
	for _, sub := range []string{"pids", "memory", "cpu", "devices", "freezer"} {
		dir, err := cgroups.GetOwnCgroupPath(sub)
		if err == nil {
			return filepath.Join(dir, "cgroup.procs"), nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return "", fmt.Errorf("no v1 cgroup hierarchy of this process found: %w", firstErr)
}

// openFile opens an existing file for writing, creating nothing.
func openFile(path string) (io.WriteCloser, error) {
	return os.OpenFile(path, os.O_WRONLY, 0)
}
