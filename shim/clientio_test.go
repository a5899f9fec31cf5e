package main

// The client's side of the shim's FIFOs in these tests: what a daemon and
// its clients do with stdin, stdout and control.

import (
	"bufio"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// control writes one control line, as the daemon does.
func (p *proc) control(line string) {
	p.t.Helper()
	f, err := os.OpenFile(p.path("control"), os.O_WRONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		p.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		p.t.Fatal(err)
	}
}

// readAll reads an output FIFO to EOF, which comes when the shim is gone.
func readAll(t *testing.T, f *os.File) string {
	t.Helper()
	f.SetReadDeadline(time.Now().Add(wait))
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatalf("read %s: %v (got %q)", f.Name(), err, data)
	}
	return string(data)
}

// lineReader reads lines of an output FIFO, each within the deadline.
type lineReader struct {
	f *os.File
	r *bufio.Reader
}

func newLineReader(f *os.File) *lineReader { return &lineReader{f: f, r: bufio.NewReader(f)} }

// until reads lines until one equals want (ignoring \r), and returns the
// lines read before it.
func (l *lineReader) until(t *testing.T, want string) []string {
	t.Helper()
	var seen []string
	for {
		l.f.SetReadDeadline(time.Now().Add(wait))
		line, err := l.r.ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		if line == want {
			return seen
		}
		if line != "" {
			seen = append(seen, line)
		}
		if err != nil {
			t.Fatalf("waiting for %q on %s: %v (read %q)", want, l.f.Name(), err, seen)
		}
	}
}

// writeStdin opens the stdin FIFO as a client, writes s and closes it.
func (p *proc) writeStdin(s string) {
	p.t.Helper()
	f := p.openStdin()
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		p.t.Fatal(err)
	}
}

// openStdin opens the stdin FIFO as a client, for writes bounded in time.
func (p *proc) openStdin() *os.File {
	p.t.Helper()
	f, err := os.OpenFile(p.path("stdin"), os.O_WRONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		p.t.Fatalf("open stdin fifo (the shim must hold its read end): %v", err)
	}
	f.SetWriteDeadline(time.Now().Add(wait))
	return f
}
