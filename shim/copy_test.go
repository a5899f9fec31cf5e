package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evjournal/containerd/cri/crilog"
)

// syncBuffer is a bytes.Buffer safe for the copier goroutine and the test.
type syncBuffer struct {
	mu  chan struct{}
	buf bytes.Buffer
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{mu: make(chan struct{}, 1)} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu <- struct{}{}
	defer func() { <-b.mu }()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu <- struct{}{}
	defer func() { <-b.mu }()
	return b.buf.String()
}

// TestDrain: drain returns once the copies reach EOF, with every byte moved.
func TestDrain(t *testing.T) {
	r, w, _ := os.Pipe()
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	out := newSyncBuffer()
	c := (&copier{src: r, dst: out, keep: true, last: &last}).start()
	w.WriteString(strings.Repeat("x", 100000))
	w.Close()
	if r := drain([]*copier{c}, &last, 10*time.Second, 10*time.Second); r != drained {
		t.Fatalf("drain ended %d although the copy reached EOF", r)
	}
	if n := len(out.String()); n != 100000 {
		t.Errorf("copied %d bytes, want 100000", n)
	}
}

// TestDrainGivesUp: an output still held open by someone (a child of the
// process) stops the wait after the idle time, not never.
func TestDrainGivesUp(t *testing.T) {
	r, w, _ := os.Pipe()
	defer w.Close()
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	c := (&copier{src: r, keep: true, last: &last}).start()
	start := time.Now()
	if r := drain([]*copier{c}, &last, 50*time.Millisecond, 10*time.Second); r != drainIdleGaveUp {
		t.Fatalf("drain ended %d with the writer still open and idle, want drainIdleGaveUp", r)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("drain took %v to give up", d)
	}
	w.Close()
	<-c.done
}

// TestDrainWaitsForSlowReader: output the client has not read yet is not
// dropped while it is within the limit, even long after the idle time.
func TestDrainWaitsForSlowReader(t *testing.T) {
	src, w, _ := os.Pipe()
	r, dst, _ := os.Pipe()
	defer r.Close()
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	c := (&copier{src: src, dst: dst, keep: true, last: &last, end: func() { dst.Close() }}).start()
	go func() {
		w.WriteString(strings.Repeat("z", 300000)) // more than the pipes hold
		w.Close()
	}()
	// Drain from the moment output is pending (the copy blocked on dst),
	// as after a real exit: a writer goroutine slow to start under load
	// would otherwise look like an idle copy.
	for !c.writing.Load() {
		time.Sleep(time.Millisecond) // a flag to poll, no event
	}
	const idle = 20 * time.Millisecond
	result := make(chan drainResult, 1)
	go func() { result <- drain([]*copier{c}, &last, idle, time.Minute) }()
	select {
	case r := <-result:
		t.Fatalf("drain ended (%d) while output was still pending", r)
	case <-time.After(20 * idle): // the behaviour under test is a timeout
	}
	data, _ := io.ReadAll(r)
	if len(data) != 300000 {
		t.Errorf("read %d bytes, want 300000", len(data))
	}
	if r := <-result; r != drained {
		t.Errorf("drain ended %d, want drained", r)
	}
}

// TestDrainLimit: output nobody reads is dropped at the limit, never
// waited on: a client that stopped reading cannot keep the shim.
func TestDrainLimit(t *testing.T) {
	src, w, _ := os.Pipe()
	r, dst, _ := os.Pipe()
	defer r.Close()
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	c := (&copier{src: src, dst: dst, keep: true, last: &last}).start()
	w.WriteString(strings.Repeat("z", 100000)) // fills dst; the rest waits in the copy
	w.Close()
	const limit = 200 * time.Millisecond
	start := time.Now()
	if got := drain([]*copier{c}, &last, 20*time.Millisecond, limit); got != drainTimedOut {
		t.Fatalf("drain ended %d with output pending for a reader that never reads, want drainTimedOut", got)
	}
	if d := time.Since(start); d < limit || d > limit+5*time.Second {
		t.Errorf("drain gave up after %v, want about %v", d, limit)
	}
	dst.Close() // ends the blocked write, then the copy
	<-c.done
}

// TestCopierKeepsReading: an output whose destination fails is still read,
// so the process never blocks on a full pipe.
func TestCopierKeepsReading(t *testing.T) {
	r, w, _ := os.Pipe()
	closed, _ := os.CreateTemp(t.TempDir(), "dst")
	closed.Close() // every write fails
	c := (&copier{src: r, dst: closed, keep: true}).start()
	w.WriteString(strings.Repeat("y", 200000)) // more than a pipe holds
	w.Close()
	<-c.done
}

func TestTail(t *testing.T) {
	var tl tail
	tl.Write([]byte(strings.Repeat("a", tailMax)))
	tl.Write([]byte("the end"))
	if got := tl.String(); len(got) != tailMax || !strings.HasSuffix(got, "the end") {
		t.Errorf("tail holds %d bytes ending %q", len(got), got[len(got)-10:])
	}
	tl.stop()
	tl.Write([]byte("more"))
	if got := tl.String(); got != "" {
		t.Errorf("after stop: %q", got)
	}
}

// TestStopCopiesFlushesLog: a CRI log copy the drain gave up on (a child
// holds the pipe) is stopped, and its unfinished last line is written as a
// P record; the shim waits for it only briefly.
func TestStopCopiesFlushesLog(t *testing.T) {
	r, w, _ := os.Pipe()
	defer w.Close()
	path := filepath.Join(t.TempDir(), "0.log")
	s := &stdio{log: &logger{}}
	s.last.Store(time.Now().UnixNano())
	if err := s.openCRILog(path); err != nil {
		t.Fatal(err)
	}
	c := s.logCopier(r, crilog.Stdout).start()
	w.WriteString("line\nprompt> ")
	if got := drain([]*copier{c}, &s.last, 50*time.Millisecond, 10*time.Second); got != drainIdleGaveUp {
		t.Fatalf("drain ended %d, want drainIdleGaveUp", got)
	}
	stopCopies([]*copier{c}, time.Second)
	select {
	case <-c.done:
	default:
		t.Fatal("the log copy still runs after stopCopies")
	}
	data, _ := os.ReadFile(path)
	recs, err := crilog.ReadAll(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || string(recs[0].Content) != "line" || recs[0].Partial ||
		string(recs[1].Content) != "prompt> " || !recs[1].Partial {
		t.Fatalf("log %q, want F line then P prompt", data)
	}
}

// TestLogSinkFullDisk: writes that fail (here: a closed log) are dropped,
// the copy goes on draining, and shim-log.json gets one warning, plus the
// count at the stream's end.
func TestLogSinkFullDisk(t *testing.T) {
	dir := t.TempDir()
	f, err := crilog.OpenWith(filepath.Join(dir, "0.log"), openLogFile)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	log := openLog(filepath.Join(dir, "shim-log.json"))
	k := newLogSink(f, crilog.Stderr, log)
	for range 3 {
		if n, err := k.Write([]byte("lost\n")); n != 5 || err != nil {
			t.Fatalf("Write = %d, %v; want every byte taken, no error", n, err)
		}
	}
	k.close()
	data, _ := os.ReadFile(filepath.Join(dir, "shim-log.json"))
	if lines := strings.Count(string(data), "\n"); lines != 2 || !strings.Contains(string(data), "3 writes failed") {
		t.Fatalf("shim log %q, want the first failure and the count", data)
	}
}
