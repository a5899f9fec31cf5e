package monitor

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// maxEvents bounds one epoll_wait. The kernel hands out ready fds in the order
// they became ready, so a v1 OOM notification (signalled before the kill) does
// not come in a later batch than its victim's hang-up.
const maxEvents = 128

// batch is what one wakeup produced, delivered OOMs first.
type batch struct {
	ooms  []string
	exits []ExitSource
}

// run is the monitor's only goroutine.
func (m *Monitor) run() {
	defer close(m.stopped)
	defer close(m.exits)
	defer close(m.ooms)
	events := make([]unix.EpollEvent, maxEvents)
	for {
		n, err := unix.EpollWait(m.epfd, events, m.waitTimeout())
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			m.log.WithError(err).Error("monitor: epoll_wait failed; the monitor stops")
			return
		}
		if m.stopping() {
			return
		}
		b := m.collect(events[:n])
		if !m.deliver(b) {
			return
		}
		if len(b.ooms)+len(b.exits) > 0 {
			// The last send readied its receiver on this thread's P. Yield so it
			// runs here now, rather than after another thread is woken to steal
			// it while this one blocks in epoll_wait (~30 µs per exit on a VM).
			runtime.Gosched()
		}
	}
}

// stopping says whether Close was called.
func (m *Monitor) stopping() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// collect turns one wakeup into reports. Order matters: new watches with a
// given baseline, pending v1 watches and every OOM notification are read
// before exits are resolved, so a kill
// counted before a hang-up is reported before it.
func (m *Monitor) collect(events []unix.EpollEvent) *batch {
	b := &batch{}
	for i := range events {
		if tokenOf(&events[i]) == tokWake {
			// Drained before the unread list is taken: a readSoon after
			// this point leaves the eventfd set, so its watch is read at
			// the next wakeup instead of its signal being drained unseen.
			drainEventfd(m.wake)
		}
	}
	m.readUnread(b)
	m.recheckPending(b)
	for i := range events {
		m.dispatch(&events[i], b)
	}
	m.checkScoped(b)
	return b
}

// dispatch routes one epoll event by its token.
func (m *Monitor) dispatch(ev *unix.EpollEvent, b *batch) {
	switch tok := tokenOf(ev); tok {
	case tokWake:
		// drained by collect
	case tokInotify:
		m.readInotify(b)
	default:
		if p, ok := m.takeExit(tok, ev.Events); ok {
			b.exits = append(b.exits, p)
		} else if w := m.v1Watch(tok); w != nil {
			m.v1Fired(w, b)
		}
		// else: a source removed after epoll_wait returned; tokens are never reused.
	}
}

// checkScoped re-reads the OOM counter of each exiting source that names its
// cgroup (OOMScoped), so its OOM is reported first even when the kernel's
// notification is still in flight.
func (m *Monitor) checkScoped(b *batch) {
	for _, p := range b.exits {
		s, ok := p.(OOMScoped)
		if !ok {
			continue
		}
		if w := m.lookup(s.OOMID()); w != nil && m.checkInto(w, b) != unchanged {
			delete(m.pending, w)
		}
	}
}

// deliver sends b's OOMs, then its exits, on the unbuffered channels. It
// gives up, returning false, when Close is called meanwhile.
func (m *Monitor) deliver(b *batch) bool {
	for _, id := range b.ooms {
		select {
		case m.ooms <- id:
		case <-m.done:
			return false
		}
	}
	for _, p := range b.exits {
		select {
		case m.exits <- p:
		case <-m.done:
			return false
		}
	}
	return true
}
