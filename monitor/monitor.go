// Package monitor turns kernel notifications into two channels for the
// supervisor: Exits (the hang-up of a shim's exit FIFO) and OOMs (a memory
// cgroup's oom_kill counter going up).
//
// Everything is watched from ONE goroutine blocked in ONE epoll_wait: exit
// FIFOs, one eventfd per cgroup v1 memory cgroup, one inotify instance for
// every cgroup v2 memory.events file, and an eventfd that wakes the loop for
// Close. Watching costs no goroutine, timer or poll per container.
//
// Delivery order within one wakeup is: every OOM, then every exit. An OOM kill
// of a container's init therefore reaches the supervisor before that init's
// exit when both are ready together, and the OOMScoped hook below extends this
// to notifications the kernel has not delivered yet.
package monitor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// ExitSource is something whose exit is signalled by the hang-up of a fd: the
// read end of the shim's exit FIFO, opened O_RDONLY|O_NONBLOCK by the runtime.
// The monitor never reads nor closes it. It removes the fd from its epoll set
// before reporting the exit, so the runtime may close the fd (and the number
// may be reused) as soon as it has received the exit.
type ExitSource interface {
	ExitFD() int
}

// OOMScoped may be implemented by an ExitSource whose process lives in a
// memory cgroup watched under OOMID(). Before reporting that exit, the monitor
// re-reads the cgroup's oom_kill counter and reports an OOM first if it went
// up: the kernel counts a kill before sending SIGKILL, but its cgroup v2
// notification is asynchronous (and rate limited), so without this re-read the
// exit could overtake the OOM.
type OOMScoped interface {
	OOMID() string
}

// OOMSource describes a container's memory cgroup. Exactly one of V1Dir and
// V2Dir is set. Register it before any process can run in the cgroup (the
// supervisor does so before `runc start`): kills counted before MonitorOOM
// read its baseline are not reported.
type OOMSource struct {
	ID    string // container id, reported on OOMs()
	V1Dir string // cgroup v1 memory dir (has memory.oom_control, cgroup.event_control), or ""
	V2Dir string // cgroup v2 dir (has memory.events), or ""
	// Baseline, when not nil, is the oom_kill counter as read before the
	// container started (the shim reads it between `runc create` and
	// `runc start`): kills above it are reported, including one that
	// happened before the watch was armed, which is checked for at once.
	// nil: the counter is read at registration, and only later kills count.
	Baseline *uint64
}

// Errors returned by the registration methods; test with errors.Is.
var (
	ErrClosed  = errors.New("monitor closed")
	ErrExists  = errors.New("already monitored")
	ErrInvalid = errors.New("invalid source")
)

// Epoll tokens of the monitor's own fds; sources get tokens from firstToken
// on. A token is never reused, so an event still queued for a source that was
// just removed can never be mistaken for a newer source on the same fd number.
const (
	tokWake uint64 = iota
	tokInotify
	firstToken
)

// Monitor is the epoll loop. Its methods are safe for concurrent use.
type Monitor struct {
	epfd  int // the one epoll fd; closed by Close after the loop returned
	wake  int // eventfd in the epoll set that interrupts epoll_wait for Close
	inofd int // the one inotify instance holding every v2 watch

	exits   chan ExitSource
	ooms    chan string
	done    chan struct{} // closed by Close: the loop must return
	stopped chan struct{} // closed by the loop once it has returned

	log       *logrus.Entry
	v2File    string        // "memory.events"; tests may watch another file
	recheck   time.Duration // epoll_wait timeout while a v1 watch is pending
	pendFor   time.Duration // how long a v1 notification without a kill is re-checked
	closeOnce sync.Once
	closeErr  error

	mu      sync.Mutex // guards the registry below; held only for map updates and epoll/inotify calls
	closed  bool
	nextTok uint64
	procs   map[uint64]exitReg   // exit sources by epoll token
	v1      map[uint64]*oomWatch // v1 watch by the epoll token of its eventfd
	byID    map[string]*oomWatch // every OOM watch by container id
	files   map[int32]*oomWatch  // v2 watch by the inotify wd of its memory.events
	dirs    map[int32]*dirWatch  // v2 parent dir watch by inotify wd
	// unread are watches registered with a given Baseline, to be read once
	// by the loop: a kill between that baseline and the registration gave
	// no notification.
	unread []*oomWatch

	pending map[*oomWatch]time.Time // owned by the loop: v1 watches notified with no kill counted yet
	inoBuf  []byte                  // owned by the loop: inotify read buffer
}

// Option configures a Monitor.
type Option func(*Monitor)

// WithLogger sets the logger for warnings (default: logrus' standard logger).
func WithLogger(l *logrus.Entry) Option {
	return func(m *Monitor) { m.log = l }
}

// New creates the epoll set and starts the loop goroutine.
func New(opts ...Option) (*Monitor, error) {
	m := &Monitor{
		epfd: -1, wake: -1, inofd: -1,
		exits:   make(chan ExitSource),
		ooms:    make(chan string),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
		log:     logrus.WithField("module", "monitor"),
		v2File:  "memory.events",
		recheck: 10 * time.Millisecond,
		pendFor: 2 * time.Second,
		nextTok: firstToken,
		procs:   map[uint64]exitReg{},
		v1:      map[uint64]*oomWatch{},
		byID:    map[string]*oomWatch{},
		files:   map[int32]*oomWatch{},
		dirs:    map[int32]*dirWatch{},
		pending: map[*oomWatch]time.Time{},
		inoBuf:  make([]byte, 64<<10),
	}
	for _, o := range opts {
		o(m)
	}
	if err := m.open(); err != nil {
		m.closeFDs()
		return nil, err
	}
	go m.run()
	return m, nil
}

// open creates the epoll set with the wake eventfd and the inotify fd in it.
func (m *Monitor) open() error {
	var err error
	if m.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return fmt.Errorf("monitor: epoll_create1: %w", err)
	}
	if m.wake, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return fmt.Errorf("monitor: eventfd: %w", err)
	}
	if m.inofd, err = unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK); err != nil {
		return fmt.Errorf("monitor: inotify_init1: %w", err)
	}
	if err := m.epollAdd(m.wake, tokWake, unix.EPOLLIN); err != nil {
		return err
	}
	return m.epollAdd(m.inofd, tokInotify, unix.EPOLLIN)
}

// Exits delivers each monitored ExitSource once, after its fd hung up. It is
// unbuffered and closed when the monitor is closed.
func (m *Monitor) Exits() <-chan ExitSource { return m.exits }

// OOMs delivers a container id each time its oom_kill counter went up. It is
// unbuffered and closed when the monitor is closed.
func (m *Monitor) OOMs() <-chan string { return m.ooms }

// Count is the number of sources registered now (exit fds and OOM watches).
func (m *Monitor) Count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.procs) + len(m.byID)
}

// Close stops the loop (even one blocked on a send nobody receives), then
// closes the epoll fd and every fd the monitor owns. Exit fds are the caller's
// and stay open. Both channels are closed once Close returns.
func (m *Monitor) Close() error {
	m.closeOnce.Do(func() {
		m.mu.Lock()
		m.closed = true
		m.mu.Unlock()
		close(m.done)
		m.signalWake()
		<-m.stopped
		m.closeErr = m.release()
	})
	return m.closeErr
}

// release closes every OOM watch and the monitor's own fds. The loop has
// returned, so nothing else uses them.
func (m *Monitor) release() error {
	m.mu.Lock()
	watches := make([]*oomWatch, 0, len(m.byID))
	for _, w := range m.byID {
		watches = append(watches, w)
	}
	clear(m.byID)
	clear(m.v1)
	clear(m.files)
	clear(m.dirs)
	clear(m.procs)
	err := m.closeFDs() // under mu: a StopOOM racing with Close never sees a stale epfd
	m.mu.Unlock()
	for _, w := range watches {
		w.close()
	}
	return err
}

func (m *Monitor) closeFDs() error {
	var first error
	for _, fd := range []*int{&m.inofd, &m.wake, &m.epfd} {
		if *fd < 0 {
			continue
		}
		if err := unix.Close(*fd); err != nil && first == nil {
			first = fmt.Errorf("monitor: close: %w", err)
		}
		*fd = -1
	}
	return first
}

// signalWake makes the loop's epoll_wait return.
func (m *Monitor) signalWake() {
	if err := signalEventfd(m.wake); err != nil {
		m.log.WithError(err).Warn("monitor: cannot wake the loop")
	}
}

// token hands out the next epoll token. Call with m.mu held.
func (m *Monitor) token() uint64 {
	t := m.nextTok
	m.nextTok++
	return t
}

// epollAdd puts fd in the set under token tok.
func (m *Monitor) epollAdd(fd int, tok uint64, events uint32) error {
	ev := unix.EpollEvent{Events: events, Fd: int32(uint32(tok)), Pad: int32(uint32(tok >> 32))}
	if err := unix.EpollCtl(m.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("monitor: epoll_ctl add fd %d: %w", fd, err)
	}
	return nil
}

// epollDel takes fd out of the set. ENOENT/EBADF mean the kernel already
// dropped it (its last reference was closed), which is the same outcome.
func (m *Monitor) epollDel(fd int) error {
	err := unix.EpollCtl(m.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	if err == nil || err == unix.ENOENT || err == unix.EBADF {
		return nil
	}
	return fmt.Errorf("monitor: epoll_ctl del fd %d: %w", fd, err)
}

// tokenOf reads back the token epollAdd stored in the event's data.
func tokenOf(ev *unix.EpollEvent) uint64 {
	return uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
}

// signalEventfd adds one to an eventfd's counter. EAGAIN means the counter
// is saturated, so the fd is readable anyway.
func signalEventfd(fd int) error {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	if _, err := unix.Write(fd, one[:]); err != nil && err != unix.EAGAIN {
		return err
	}
	return nil
}

// drainEventfd resets a non-blocking eventfd so level-triggered epoll stops
// reporting it.
func drainEventfd(fd int) {
	var buf [8]byte
	unix.Read(fd, buf[:]) // EAGAIN: already drained
}
