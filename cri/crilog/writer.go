// Package crilog writes and reads kubelet's CRI container log format: one
// record per line,
//
//	<RFC3339Nano timestamp> <stream> <tag> <content>\n
//
// where stream is "stdout" or "stderr" and tag is "F" for the end of a line
// of the container's output or "P" for a piece of a line that goes on in the
// next record of the same stream. Concatenating a stream's contents, with a
// newline after each F record, gives back the bytes the process wrote.
//
// A File is one log file shared by the streams of a container; each stream
// writes through its own StreamWriter. Every record reaches the file in one
// write(2) under the File's lock, so records of two streams never interleave.
// The package uses only the standard library, so it can run inside the shim.
package crilog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Stream names as they appear in a record.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// Tags of a record.
const (
	TagPartial = "P"
	TagFull    = "F"
)

// DefaultMaxLine is the longest content a record holds (containerd's default
// max_container_log_line_size). A longer line is split into P records of
// this size and ends with an F record.
const DefaultMaxLine = 16 * 1024

// ErrClosed is returned by writes to a closed File.
var ErrClosed = errors.New("crilog: log file closed")

// File is a CRI log file that several streams append to.
type File struct {
	path string
	open OpenFunc // used by Open and by every Reopen

	mu sync.Mutex // serialises records and guards f
	f  *os.File   // nil once closed
}

// Open opens (or creates) the log at path for appending. A missing parent
// directory is an error naming it: kubelet creates the pod's log directory
// before it creates the container, so its absence is a caller's mistake.
func Open(path string) (*File, error) {
	return OpenWith(path, openLog)
}

// OpenFunc opens a log path for appending, creating it if missing.
type OpenFunc func(path string) (*os.File, error)

// OpenWith is Open with the caller's open function, which Reopen uses too.
// A caller that runs as root on a path a client named (the shim) passes
// one that refuses a symlink or anything but a regular file; Open's own
// follows symlinks, as os.OpenFile does.
func OpenWith(path string, open OpenFunc) (*File, error) {
	f, err := open(path)
	if err != nil {
		return nil, err
	}
	return &File{path: path, open: open, f: f}, nil
}

func openLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err == nil {
		return f, nil
	}
	if errors.Is(err, os.ErrNotExist) {
		dir := filepath.Dir(path)
		if _, serr := os.Stat(dir); serr != nil {
			return nil, fmt.Errorf("crilog: log dir %s: %w", dir, serr)
		}
	}
	return nil, fmt.Errorf("crilog: open log: %w", err)
}

// Path is the path the file was opened with.
func (l *File) Path() string { return l.path }

// Reopen opens the path anew and switches the streams to it, for CRI's
// ReopenContainerLog: kubelet has renamed the file to rotate it, and the
// records written from now on go to a new file at the old path. If the open
// fails the old file stays in use, so no output is lost, and the error says
// why.
func (l *File) Reopen() error {
	f, err := l.open(l.path)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		f.Close()
		return ErrClosed
	}
	old := l.f
	l.f = f
	return old.Close()
}

// Close closes the file. The streams' pending partial lines are not
// written: close the StreamWriters first.
func (l *File) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return ErrClosed
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// writeRecord formats one record into buf under the lock (so timestamps
// are in file order) and writes it in one call. It returns buf, grown if it
// had to be, for the caller to reuse.
func (l *File) writeRecord(buf []byte, now func() time.Time, stream, tag string, a, b []byte) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return buf, ErrClosed
	}
	buf = now().UTC().AppendFormat(buf[:0], time.RFC3339Nano)
	buf = append(buf, ' ')
	buf = append(buf, stream...)
	buf = append(buf, ' ')
	buf = append(buf, tag...)
	buf = append(buf, ' ')
	buf = append(buf, a...)
	buf = append(buf, b...)
	buf = append(buf, '\n')
	_, err := l.f.Write(buf)
	return buf, err
}
