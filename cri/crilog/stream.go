package crilog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// StreamWriter turns one output stream of a process into records of a File.
// It keeps the unfinished end of a line until its newline comes, the line
// reaches the bound (then a P record is written), or Flush or Close is
// called. A StreamWriter is used by one goroutine (the stream's copier);
// the File may be shared by any number of them.
type StreamWriter struct {
	file   *File
	stream string
	max    int              // longest content of one record
	now    func() time.Time // the clock; time.Now but in tests

	pending []byte // start of a line not yet written, len <= max
	rec     []byte // the record being built, reused
}

// Stream returns a writer of the stream named name (Stdout or Stderr) into
// l, splitting lines longer than maxLine bytes (DefaultMaxLine if <= 0).
func (l *File) Stream(name string, maxLine int) *StreamWriter {
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	return &StreamWriter{file: l, stream: name, max: maxLine, now: time.Now}
}

// Write writes the complete lines of p as records and keeps the rest. It
// returns the first failed write to the file; the bytes of p are consumed
// all the same (see Copy for a copier that keeps draining).
func (w *StreamWriter) Write(p []byte) (int, error) {
	n := len(p)
	var first error
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			rest, err := w.spill(p)
			keep(&first, err)
			w.pending = append(w.pending, rest...)
			break
		}
		rest, err := w.spill(p[:i])
		keep(&first, err)
		keep(&first, w.emitPending(TagFull, rest))
		p = p[i+1:]
	}
	return n, first
}

// spill takes more bytes of the current line (no newline among them).
// While pending and b together overflow the bound it writes P records of
// max bytes; it returns the rest of b, which fits beside pending. The
// common case, a short line with nothing pending, copies nothing.
func (w *StreamWriter) spill(b []byte) ([]byte, error) {
	var first error
	for len(w.pending)+len(b) > w.max {
		n := w.max - len(w.pending)
		keep(&first, w.emitPending(TagPartial, b[:n]))
		b = b[n:]
	}
	return b, first
}

// emitPending writes the pending bytes followed by tail as one record and
// empties pending.
func (w *StreamWriter) emitPending(tag string, tail []byte) error {
	var err error
	w.rec, err = w.file.writeRecord(w.rec, w.now, w.stream, tag, w.pending, tail)
	w.pending = w.pending[:0]
	return err
}

// Flush writes the pending start of a line, if any, as a P record: for a
// copier that has seen its stream idle (a prompt without a newline).
func (w *StreamWriter) Flush() error {
	if len(w.pending) == 0 {
		return nil
	}
	return w.emitPending(TagPartial, nil)
}

// Close flushes the pending bytes. A stream whose last line has no newline
// thus ends with a P record, as containerd writes it, and kubelet shows the
// output exactly as written (no newline added). The File stays open.
func (w *StreamWriter) Close() error {
	return w.Flush()
}

// Copy copies r into the stream until EOF, then closes the stream. A failed
// write to the file does not stop it (the process must not block on a full
// pipe because the disk is full); the first such error is returned at the
// end, with the read error if any.
func (w *StreamWriter) Copy(r io.Reader, buf []byte) error {
	if len(buf) == 0 {
		buf = make([]byte, 32*1024)
	}
	var werr error
	for {
		n, err := r.Read(buf)
		if n > 0 {
			_, e := w.Write(buf[:n])
			keep(&werr, e)
		}
		if err != nil {
			keep(&werr, w.Close())
			if errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) {
				return werr
			}
			return errors.Join(fmt.Errorf("crilog: read %s: %w", w.stream, err), werr)
		}
	}
}

func keep(first *error, err error) {
	if *first == nil && err != nil {
		*first = err
	}
}
