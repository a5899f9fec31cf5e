package main

import (
	"context"
	"io"
	"os"
	"path/filepath"

	"github.com/containerd/fifo"
	"golang.org/x/sys/unix"
)

// fifoSet is ctr's side of an attached process's stdio: three FIFOs (mode
// 0600) in a private temp dir, made and opened by github.com/containerd/fifo
// before the process is created, so that neither side blocks:
//
//   - stdin: opened read-write; ctr writes, the shim reads;
//   - stdout, stderr: a read end ctr copies from, plus a keep-alive write
//     end so that the reader sees no EOF before the shim opens its end.
//     Closing the keep-alive after the process's exit makes the reader get
//     EOF once the shim is gone and the data drained.
//
// The shim opens these paths with its own code (shim/clientpaths.go): it
// must refuse symlinks and regular files a client names, which the library
// does not check, and it keeps its binary small.
type fifoSet struct {
	dir                   string
	stdin, stdout, stderr string // paths sent to the daemon

	in         io.ReadWriteCloser
	outR, errR io.ReadWriteCloser
	outW, errW io.ReadWriteCloser
}

func newFifoSet(ctx context.Context) (f *fifoSet, err error) {
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
	if f.in, err = fifo.OpenFifo(ctx, f.stdin, unix.O_CREAT|unix.O_RDWR, 0o600); err != nil {
		return f, err
	}
	if f.outR, f.outW, err = openOutput(ctx, f.stdout); err != nil {
		return f, err
	}
	f.errR, f.errW, err = openOutput(ctx, f.stderr)
	return f, err
}

// openOutput makes the FIFO and opens its read end without waiting for a
// writer, then the keep-alive write end, which does not block because a
// reader exists.
func openOutput(ctx context.Context, path string) (r, w io.ReadWriteCloser, err error) {
	if r, err = fifo.OpenFifo(ctx, path, unix.O_CREAT|unix.O_RDONLY|unix.O_NONBLOCK, 0o600); err != nil {
		return nil, nil, err
	}
	if w, err = fifo.OpenFifo(ctx, path, unix.O_WRONLY, 0); err != nil {
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
	for _, file := range []io.Closer{f.in, f.outR, f.errR, f.outW, f.errW} {
		closeFile(file)
	}
	os.RemoveAll(f.dir)
}

func closeFile(f io.Closer) {
	if f != nil {
		f.Close()
	}
}
