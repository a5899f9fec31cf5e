package main

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// fifoSet is ctr's side of an attached process's stdio: three FIFOs (mode
// 0600) in a private temp dir, opened before the process is created so
// that neither side blocks:
//
//   - stdin: opened read-write; ctr writes, the shim reads;
//   - stdout, stderr: a non-blocking read end ctr copies from, plus a
//     keep-alive write end so that the reader sees no EOF before the shim
//     opens its end. Closing the keep-alive after the process's exit
//     makes the reader get EOF once the shim is gone and the data drained.
type fifoSet struct {
	dir                   string
	stdin, stdout, stderr string // paths sent to the daemon

	in         *os.File
	outR, errR *os.File
	outW, errW *os.File
}

func newFifoSet() (f *fifoSet, err error) {
	dir, err := os.MkdirTemp("", "ctr-")
	if err != nil {
		return nil, err
	}
	f = &fifoSet{
		dir:    dir,
		stdin:  filepath.Join(dir, "stdin"),
		stdout: filepath.Join(dir, "stdout"),
		stderr: filepath.Join(dir, "stderr"),
	}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	for _, p := range []string{f.stdin, f.stdout, f.stderr} {
		if err := unix.Mkfifo(p, 0o600); err != nil {
			return f, fmt.Errorf("mkfifo %s: %w", p, err)
		}
	}
	if f.in, err = os.OpenFile(f.stdin, os.O_RDWR, 0); err != nil {
		return f, err
	}
	if f.outR, f.outW, err = openOutput(f.stdout); err != nil {
		return f, err
	}
	f.errR, f.errW, err = openOutput(f.stderr)
	return f, err
}

// openOutput opens the read end (non-blocking open, reads through Go's
// poller) and then the keep-alive write end, which does not block because
// a reader exists.
func openOutput(path string) (r, w *os.File, err error) {
	if r, err = os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0); err != nil {
		return nil, nil, err
	}
	if w, err = os.OpenFile(path, os.O_WRONLY, 0); err != nil {
		r.Close()
		return nil, nil, err
	}
	return r, w, nil
}

// releaseOutputs closes the keep-alive write ends (after the process exited).
func (f *fifoSet) releaseOutputs() {
	closeFile(f.outW)
	closeFile(f.errW)
}

// Close closes every end and removes the temp dir.
func (f *fifoSet) Close() {
	for _, file := range []*os.File{f.in, f.outR, f.errR, f.outW, f.errW} {
		closeFile(file)
	}
	os.RemoveAll(f.dir)
}

func closeFile(f *os.File) {
	if f != nil {
		f.Close()
	}
}
