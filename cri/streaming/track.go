package streaming

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// group counts work in flight (HTTP handlers, runtime calls) and, once
// closed, refuses new work, so that a WaitGroup never gains work while Stop
// waits on it.
type group struct {
	mu     sync.Mutex
	closed bool // guarded by mu
	wg     sync.WaitGroup
}

// enter reports whether the work may start; if so, leave must follow.
func (g *group) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	return true
}

func (g *group) leave() { g.wg.Done() }

// close refuses new work and returns a channel closed once the work in
// flight is done.
func (g *group) close() <-chan struct{} {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	done := make(chan struct{})
	go func() {
		g.wg.Wait()
		close(done)
	}()
	return done
}

// connListener remembers every accepted connection until it is closed.
// http.Server forgets a connection once a handler hijacks it, which every
// SPDY and websocket stream does, so Server.Close alone would leave the
// streams running.
type connListener struct {
	net.Listener
	mu     sync.Mutex
	conns  map[*trackedConn]struct{} // guarded by mu
	closed bool                      // guarded by mu
}

func newConnListener(l net.Listener) *connListener {
	return &connListener{Listener: l, conns: make(map[*trackedConn]struct{})}
}

func (l *connListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		c.Close()
		return nil, net.ErrClosed
	}
	tc := &trackedConn{Conn: c, l: l}
	l.conns[tc] = struct{}{}
	return tc, nil
}

// Close stops accepting; the connections accepted stay open. Closing twice
// is fine: http.Server.Close and Stop both do it.
func (l *connListener) Close() error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	if err := l.Listener.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// closeConns closes the accepted connections, all of them or only those
// whose handler will not close them soon by itself.
func (l *connListener) closeConns(all bool) {
	l.mu.Lock()
	var conns []*trackedConn
	for c := range l.conns {
		if all || !c.closing.Load() {
			conns = append(conns, c)
		}
	}
	l.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

type trackedConn struct {
	net.Conn
	l *connListener
	// closing is set once an exec or attach call has returned: its
	// handler is writing the final status and then closes the connection,
	// so Stop lets it finish rather than cut the status off.
	closing atomic.Bool
	once    sync.Once
}

// Close closes once; later calls succeed without effect. spdystream closes
// the connection again after Stop did, and on an error it keeps a goroutine
// for a second to report it to nobody.
func (c *trackedConn) Close() error {
	var err error
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
		err = c.Conn.Close()
	})
	return err
}

// connKey finds a request's connection in its context (http.Server's
// ConnContext puts it there).
type connKey struct{}

// markClosing notes that the connection of the request behind ctx is
// about to be closed by its handler.
func markClosing(ctx context.Context) {
	if c, ok := ctx.Value(connKey{}).(*trackedConn); ok {
		c.closing.Store(true)
	}
}

// wait reports whether done closed within d.
func wait(done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
