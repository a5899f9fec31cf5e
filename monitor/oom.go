package monitor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// oomWatch is one container's OOM watch. The loop reads it; StopOOM and Close
// close it from other goroutines, hence mu.
type oomWatch struct {
	id  string
	dir string
	v2  bool
	log *logrus.Entry

	// Set at registration, read-only after.
	token  uint64 // v1: epoll token of efd
	fileWD int32  // v2: inotify wd on memory.events
	dirWD  int32  // v2: inotify wd on the parent dir, -1 if it could not be armed
	name   string // v2: base name of dir, as IN_DELETE on the parent names it

	mu      sync.Mutex
	closed  bool
	efd     int    // v1: the eventfd registered in cgroup.event_control
	events  string // the counter file (v1 memory.oom_control, v2 memory.events), opened per read
	count   counter
	badRead bool // the last read failed (or was empty) while the cgroup was still there
}

// outcome is what one re-read of a watch's counter found.
type outcome int

const (
	unchanged outcome = iota // no new kill
	killed                   // oom_kill went up: report one OOM
	gone                     // the cgroup (or the watch) is gone: drop it
)

// MonitorOOM reports s.ID on OOMs() each time the cgroup's oom_kill counter
// goes up. The watch ends by StopOOM, Close, or when the cgroup is removed.
func (m *Monitor) MonitorOOM(s OOMSource) error {
	if err := m.checkNew(s); err != nil {
		return err
	}
	if s.V2Dir != "" {
		return m.watchV2(s)
	}
	return m.watchV1(s)
}

// checkNew validates s and refuses an id already watched. Registration
// checks again under the lock, as the cgroup is opened without it.
func (m *Monitor) checkNew(s OOMSource) error {
	if s.ID == "" || (s.V1Dir == "") == (s.V2Dir == "") {
		return fmt.Errorf("monitor: OOM source %q needs an id and exactly one of V1Dir, V2Dir: %w", s.ID, ErrInvalid)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.admit(s.ID)
}

// admit says whether id may be registered now. Call with m.mu held.
func (m *Monitor) admit(id string) error {
	if m.closed {
		return ErrClosed
	}
	if _, ok := m.byID[id]; ok {
		return fmt.Errorf("monitor: OOM watch %q: %w", id, ErrExists)
	}
	return nil
}

// StopOOM drops the OOM watch of id and closes its fds. Unknown ids are a
// no-op: the loop may have dropped the watch already when the cgroup went away.
func (m *Monitor) StopOOM(id string) {
	m.mu.Lock()
	w := m.byID[id]
	m.mu.Unlock()
	if w != nil {
		m.remove(w)
	}
}

// remove unregisters w and closes it. Both the loop (cgroup gone) and StopOOM
// may call it; only the first does anything.
func (m *Monitor) remove(w *oomWatch) {
	m.mu.Lock()
	if m.byID[w.id] != w {
		m.mu.Unlock()
		return
	}
	delete(m.byID, w.id)
	if w.v2 {
		m.unwatchV2(w)
	} else {
		delete(m.v1, w.token)
		if err := m.epollDel(w.efd); err != nil {
			w.log.WithError(err).Warn("monitor: cannot remove OOM eventfd from epoll")
		}
	}
	m.mu.Unlock()
	w.close()
	w.log.Debug("monitor: OOM watch dropped")
}

// lookup returns the watch registered for id, or nil.
func (m *Monitor) lookup(id string) *oomWatch {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.byID[id]
}

// close releases w's fds. Safe against a concurrent check: both hold w.mu.
func (w *oomWatch) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.closed = true
	if w.efd >= 0 {
		unix.Close(w.efd)
		w.efd = -1
	}
}

// check re-reads the oom_kill counter. The watch is dropped only when its
// cgroup is really gone (kernfs answers ENODEV, or the directory no longer
// exists): a read that fails or comes back empty while the cgroup is there
// (a file being rewritten, a passing error) changes nothing, and the next
// wakeup or re-check reads again. One bad read must not end OOM reporting.
func (w *oomWatch) check() outcome {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return gone
	}
	data, err := w.read()
	if err == nil && len(data) == 0 {
		err = errEmptyRead
	}
	if err != nil {
		if w.cgroupGone(err) {
			w.log.WithError(err).Debug("monitor: cgroup removed")
			return gone
		}
		w.logBadRead(err)
		return unchanged
	}
	w.badRead = false
	if n, ok := parseCounter(data, oomKillKey); ok && w.count.update(n) {
		return killed
	}
	return unchanged
}

// errEmptyRead is a read of the counter file that returned nothing.
var errEmptyRead = errors.New("empty read")

// read returns the current content of the counter file. Call with w.mu held.
func (w *oomWatch) read() ([]byte, error) {
	return os.ReadFile(w.events)
}

// cgroupGone says whether a failed read means the cgroup was removed:
// ENODEV (kernfs, read through an fd opened before the rmdir) or the
// cgroup's directory missing.
func (w *oomWatch) cgroupGone(err error) bool {
	if errors.Is(err, unix.ENODEV) {
		return true
	}
	_, serr := os.Stat(w.dir)
	return errors.Is(serr, fs.ErrNotExist)
}

// logBadRead warns of the first of a run of failed reads of a cgroup that is
// still there; the watch stays.
func (w *oomWatch) logBadRead(err error) {
	if !w.badRead {
		w.log.WithError(err).Warn("monitor: cannot read the OOM counter of a cgroup that is still there; keeping the watch and reading again at the next event")
	}
	w.badRead = true
}

// baseline sets the count kills are reported above: given, when the source
// brought one (OOMSource.Baseline), else the counter read now. A file
// without the counter (kernel before 4.13) starts at 0 and is warned about,
// since no kill will ever show.
func (w *oomWatch) baseline(given *uint64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if given != nil {
		w.count.last = *given
		return nil
	}
	data, err := w.read()
	if err != nil {
		return fmt.Errorf("monitor: OOM watch %q: read counter: %w", w.id, err)
	}
	n, ok := parseCounter(data, oomKillKey)
	if !ok {
		w.log.Warn("monitor: no oom_kill counter in the cgroup; OOM kills cannot be reported")
	}
	w.count.last = n
	return nil
}

// readSoon has the loop read w's counter at its next wakeup, when w was
// registered with a given baseline. Call with m.mu held.
func (m *Monitor) readSoon(w *oomWatch, s OOMSource) {
	if s.Baseline == nil {
		return
	}
	m.unread = append(m.unread, w)
	m.signalWake()
}

// readUnread reads the counters of the watches readSoon queued. Called by
// the loop first at every wakeup, so such a kill comes before any exit.
func (m *Monitor) readUnread(b *batch) {
	m.mu.Lock()
	ws := m.unread
	m.unread = nil
	m.mu.Unlock()
	for _, w := range ws {
		m.checkInto(w, b)
	}
}

func newWatch(m *Monitor, s OOMSource) *oomWatch {
	dir, v2 := s.V1Dir, false
	if s.V2Dir != "" {
		dir, v2 = s.V2Dir, true
	}
	return &oomWatch{
		id: s.ID, dir: dir, v2: v2, efd: -1, fileWD: -1, dirWD: -1,
		log: m.log.WithFields(logrus.Fields{"container": s.ID, "cgroup": dir}),
	}
}
