package monitor

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// watchV1 arms the cgroup v1 OOM notifier: an eventfd registered with
// memory.oom_control through cgroup.event_control. The kernel signals it when
// the cgroup enters an OOM (repeatedly while it lasts) and when the cgroup is
// removed; check tells these apart by the oom_kill counter.
func (m *Monitor) watchV1(s OOMSource) error {
	w := newWatch(m, s)
	if err := m.armV1(w, s.Baseline); err != nil {
		w.close()
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.admit(w.id); err != nil {
		w.close()
		return err
	}
	w.token = m.token()
	m.byID[w.id] = w
	m.v1[w.token] = w
	if err := m.epollAdd(w.efd, w.token, unix.EPOLLIN); err != nil {
		delete(m.byID, w.id)
		delete(m.v1, w.token)
		w.close()
		return err
	}
	m.readSoon(w, s)
	return nil
}

// armV1 opens memory.oom_control, reads the baseline, then registers the
// eventfd. Baseline first: a kill between the two is then seen at the next
// wakeup instead of being folded into the baseline. The file is held only
// for the registration (the kernel keeps none of it); the counter is read
// by path, like v2's, so the watch pins nothing.
func (m *Monitor) armV1(w *oomWatch, given *uint64) error {
	w.events = filepath.Join(w.dir, "memory.oom_control")
	ctl, err := os.Open(w.events)
	if err != nil {
		return fmt.Errorf("monitor: OOM watch %q: %w", w.id, err)
	}
	defer ctl.Close()
	if err := w.baseline(given); err != nil {
		return err
	}
	if w.efd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return fmt.Errorf("monitor: OOM watch %q: eventfd: %w", w.id, err)
	}
	return registerEvent(w.dir, w.efd, int(ctl.Fd()))
}

// registerEvent writes "<eventfd> <fd of memory.oom_control>" to the
// cgroup's cgroup.event_control, the v1 memory cgroup notification API.
func registerEvent(dir string, efd, ctlfd int) error {
	path := filepath.Join(dir, "cgroup.event_control")
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("monitor: %w", err)
	}
	_, err = fmt.Fprintf(f, "%d %d", efd, ctlfd)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("monitor: register OOM eventfd in %s: %w", path, err)
	}
	return nil
}

// v1Watch returns the v1 watch whose eventfd has token tok, or nil.
func (m *Monitor) v1Watch(tok uint64) *oomWatch {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.v1[tok]
}

// v1Fired handles a signalled eventfd. The kernel signals it BEFORE the OOM
// killer runs (and counts the kill just before sending SIGKILL), so a read
// right after the wakeup can miss the kill. A notification without a new kill
// is therefore re-checked for a while: at every later wakeup, which includes
// the one bringing the victim's exit (so the OOM still comes first), and every
// m.recheck while nothing else happens.
func (m *Monitor) v1Fired(w *oomWatch, b *batch) {
	w.mu.Lock()
	if !w.closed {
		drainEventfd(w.efd)
	}
	w.mu.Unlock()
	switch w.check() {
	case killed:
		delete(m.pending, w)
		b.ooms = append(b.ooms, w.id)
	case gone:
		delete(m.pending, w)
		m.remove(w)
	default:
		m.pending[w] = time.Now().Add(m.pendFor)
	}
}

// recheckPending re-reads the v1 watches notified without a kill so far.
// Called by the loop first at every wakeup, before exits are collected.
func (m *Monitor) recheckPending(b *batch) {
	now := time.Now()
	for w, until := range m.pending {
		switch w.check() {
		case killed:
			b.ooms = append(b.ooms, w.id)
		case gone:
			m.remove(w)
		default:
			if now.Before(until) {
				continue
			}
		}
		delete(m.pending, w)
	}
}

// waitTimeout is the epoll_wait timeout: forever, unless a v1 watch is
// pending. It is one timeout for the whole loop, not a timer per container.
func (m *Monitor) waitTimeout() int {
	if len(m.pending) == 0 {
		return -1
	}
	return int(m.recheck / time.Millisecond)
}
