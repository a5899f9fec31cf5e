package main

import (
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// copyBufSize is small on purpose: each copy holds its buffer for the life
// of the shim, and pipes hand out at most what they hold anyway.
const copyBufSize = 8 << 10

// copier moves bytes from src to dst until src ends (EOF, or EIO on a pty
// master whose slave is gone), then runs its end hook and closes done.
type copier struct {
	src  io.Reader
	dst  io.Writer
	tee  *tail         // also gets the bytes while it records; may be nil
	keep bool          // on a dst error keep reading src (discarding)
	end  func()        // run once src ended; may be nil
	last *atomic.Int64 // unix nanoseconds of the last byte moved; may be nil
	// stop, when set, cuts src's read short (see stopCopies); may be nil.
	stop deadliner
	// deep: writes to dst run deep (a CRI log), so the stack is grown
	// first (see growStack).
	deep bool
	done chan struct{}
	// writing is true while bytes wait to be taken by dst (a client that
	// reads slowly or not yet): output is pending, the copy is not idle.
	writing atomic.Bool
}

func (c *copier) start() *copier {
	c.done = make(chan struct{})
	go c.run()
	return c
}

func (c *copier) run() {
	if c.deep {
		growStack(0)
	}
	defer close(c.done)
	if c.end != nil {
		defer c.end()
	}
	buf := make([]byte, copyBufSize)
	for {
		n, err := c.src.Read(buf)
		if n > 0 && !c.write(buf[:n]) {
			return
		}
		if err != nil {
			return
		}
	}
}

// write passes p on; false means stop copying.
func (c *copier) write(p []byte) bool {
	if c.tee != nil {
		c.tee.Write(p)
	}
	c.moved()
	if c.dst == nil {
		return true
	}
	c.writing.Store(true)
	_, err := c.dst.Write(p)
	c.writing.Store(false)
	c.moved()
	if err != nil {
		// An output whose reader is gone still drains the process's side,
		// so the process never blocks on a full pipe.
		c.dst = nil
		return c.keep
	}
	return true
}

func (c *copier) moved() {
	if c.last != nil {
		c.last.Store(time.Now().UnixNano())
	}
}

// drainResult is how a drain ended.
type drainResult int

const (
	drained         drainResult = iota // every copy reached its end
	drainIdleGaveUp                    // copies waited idle for input (a leftover child holds the pipe)
	drainTimedOut                      // output was still waiting for its client at the limit
)

// drain waits until every copier is done, within two bounds: copies that
// have waited idle for input for idle (the process is gone, yet something,
// e.g. a child it left, still holds the pipe) are abandoned; and nothing is
// waited on past limit, however much output is still pending for a client
// that does not read. The daemon already has the exit (notifyExit), so the
// bounds only decide how much late output a slow client still gets.
func drain(copies []*copier, last *atomic.Int64, idle, limit time.Duration) drainResult {
	deadline := time.Now().Add(limit)
	t := time.NewTimer(min(idle, limit))
	defer t.Stop()
	for _, c := range copies {
		for waiting := true; waiting; {
			select {
			case <-c.done:
				waiting = false
			case <-t.C:
				now := time.Now()
				if !now.Before(deadline) {
					return drainTimedOut
				}
				quiet := time.Duration(now.UnixNano() - last.Load())
				if quiet >= idle && !pending(copies) {
					return drainIdleGaveUp
				}
				t.Reset(min(max(idle-quiet, idle/4), deadline.Sub(now)))
			}
		}
	}
	return drained
}

// deadliner is a source whose blocked read can be cut short (a pipe in the
// poller).
type deadliner interface{ SetReadDeadline(t time.Time) error }

// stopCopies ends, within timeout, the copies the drain gave up on that
// can be stopped: their pending read fails at once and their end hooks run
// (a CRI log stream writes its unfinished last line). Copies without stop,
// or stuck in a write, are left as they are.
func stopCopies(copies []*copier, timeout time.Duration) {
	for _, c := range copies {
		if c.stop != nil {
			c.stop.SetReadDeadline(time.Now())
		}
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	for _, c := range copies {
		if c.stop == nil {
			continue
		}
		select {
		case <-c.done:
		case <-t.C:
			return
		}
	}
}

// pending says whether some copy holds output its client has not taken.
func pending(copies []*copier) bool {
	for _, c := range copies {
		if c.writing.Load() {
			return true
		}
	}
	return false
}

// tailMax is how much of runc's stderr is kept for its error message.
const tailMax = 4 << 10

// tail keeps the last tailMax bytes written to it until it is stopped: it
// records runc's stderr during the start, as the fallback for its error.
type tail struct {
	mu      sync.Mutex
	buf     []byte // guarded by mu
	stopped bool   // guarded by mu
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped {
		t.buf = append(t.buf, p...)
		if len(t.buf) > tailMax {
			t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailMax:]...)
		}
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// stop drops what was recorded and records no more.
func (t *tail) stop() {
	t.mu.Lock()
	t.stopped, t.buf = true, nil
	t.mu.Unlock()
}

// growStack grows the calling goroutine's stack to 16 KiB at once. A stack
// that grows later, on the first write of an idle shim, is copied frame by
// frame through the binary's pclntab, and the pages of it that this touches
// (some 500 KiB with fault-around) would stay resident for good; grown
// while the shim starts, before memtrim.ReleaseText, they are released.
//
//go:noinline
func growStack(i int) byte {
	var b [8 << 10]byte
	b[i] = 1
	return b[len(b)-1-i]
}
