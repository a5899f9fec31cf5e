package monitor

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// exitReg is one registered exit source and the fd it gave at registration:
// the fd is what must leave the epoll set, whatever ExitFD says later.
type exitReg struct {
	src ExitSource
	fd  int
}

// Monitor watches p.ExitFD() and reports p once on Exits() when it hangs up
// (EPOLLHUP or EPOLLERR). The fd is not read, so data in the FIFO is ignored.
func (m *Monitor) Monitor(p ExitSource) error {
	if p == nil || p.ExitFD() < 0 {
		return fmt.Errorf("monitor: exit source without fd: %w", ErrInvalid)
	}
	fd := p.ExitFD()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	tok := m.token()
	// In the map before the fd is in the set, so the loop never sees an event
	// it cannot resolve (a hung-up fd is ready at once).
	m.procs[tok] = exitReg{src: p, fd: fd}
	// Only hang-up and error are wanted; they are always reported, and not
	// asking for EPOLLIN keeps stray data in the FIFO from waking the loop.
	if err := m.epollAdd(fd, tok, unix.EPOLLHUP|unix.EPOLLERR); err != nil {
		delete(m.procs, tok)
		if errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("monitor: exit fd %d: %w", fd, ErrExists)
		}
		return err
	}
	return nil
}

// takeExit handles a hang-up: it removes the source from the set and the
// registry, so the caller may close the fd once it has the report.
func (m *Monitor) takeExit(tok uint64, events uint32) (ExitSource, bool) {
	if events&(unix.EPOLLHUP|unix.EPOLLERR) == 0 {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	reg, ok := m.procs[tok]
	if !ok {
		return nil, false
	}
	delete(m.procs, tok)
	if err := m.epollDel(reg.fd); err != nil {
		m.log.WithError(err).WithField("fd", reg.fd).Warn("monitor: cannot remove exit fd from epoll")
	}
	return reg.src, true
}
