package main

import (
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// The client names the paths of a process's stdio, and the shim runs as
// root: an output path must never let a client overwrite a host file (the
// daemon's own journal included). An output is a FIFO, a character device
// (/dev/null) or a path that does not exist yet, created here exclusively
// with mode 0600; an existing regular file, a symlink or a directory is
// refused. Stdin is only ever opened for reading: never created, never
// truncated. The daemon checks the same rules before a create (with an
// InvalidArgument naming the field); these opens hold against a path
// swapped in between.

var (
	errOutputKind = errors.New("is a regular file, a symlink, a directory or a socket; an output must be a FIFO, a character device or a path that does not exist yet")
	errInputKind  = errors.New("is a directory, a symlink or a socket; stdin must be a FIFO, a character device or a regular file")
	errLogKind    = errors.New("is not a regular file; a log path must be a regular file or not exist yet")
)

// openOutput opens a client's output path for writing without blocking: a
// FIFO read-write, so the open never waits for a reader and a write never
// fails with EPIPE when the client goes away (it waits for a new reader
// while the FIFO is full); a path that does not exist is created.
func openOutput(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return createOutput(path)
	}
	if err != nil {
		return nil, wrap("open output "+path, err)
	}
	defer unix.Close(fd)
	if !isStreamKind(fd) {
		return nil, wrap("output "+path, errOutputKind)
	}
	return reopen(fd, path, unix.O_RDWR|unix.O_NONBLOCK|unix.O_NOCTTY)
}

// createOutput makes a new output file: O_EXCL and O_NOFOLLOW, so a file or
// symlink that appeared since the check is not written through.
func createOutput(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, wrap("create output "+path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// openLogFile opens a CRI log path for appending (crilog.OpenFunc, so a
// Reopen after kubelet's rotation obeys it too): an existing regular file,
// never through a symlink, or a new file created exclusively, mode 0640.
// A file created by someone else between our two opens is then opened.
func openLogFile(path string) (*os.File, error) {
	f, err := openExistingLog(path)
	if errors.Is(err, unix.ENOENT) {
		f, err = createLog(path)
		if errors.Is(err, unix.EEXIST) {
			f, err = openExistingLog(path)
		}
	}
	return f, err
}

func openExistingLog(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, wrap("open log "+path, err)
	}
	defer unix.Close(fd)
	if fileType(fd) != unix.S_IFREG {
		return nil, wrap("log "+path, errLogKind)
	}
	return reopen(fd, path, unix.O_WRONLY|unix.O_APPEND|unix.O_NOCTTY)
}

func createLog(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o640)
	if errors.Is(err, unix.ENOENT) {
		return nil, wrap("create log "+path, errors.New("its directory does not exist"))
	}
	if err != nil {
		return nil, wrap("create log "+path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// openInput opens stdin read-only, not following a symlink.
func openInput(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, wrap("open stdin "+path, err)
	}
	defer unix.Close(fd)
	if !isStreamKind(fd) && fileType(fd) != unix.S_IFREG {
		return nil, wrap("stdin "+path, errInputKind)
	}
	return reopen(fd, path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
}

// isStreamKind reports whether fd is a FIFO or a character device.
func isStreamKind(fd int) bool {
	t := fileType(fd)
	return t == unix.S_IFIFO || t == unix.S_IFCHR
}

func fileType(fd int) uint32 {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0
	}
	return st.Mode & unix.S_IFMT
}

// reopen opens the very file that the O_PATH fd names (not whatever the
// path names now) with flags.
func reopen(pathFD int, path string, flags int) (*os.File, error) {
	fd, err := reopenFD(pathFD, path, flags)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// reopenFD is reopen's raw fd, for a caller that hands it to a child.
func reopenFD(pathFD int, path string, flags int) (int, error) {
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(pathFD), flags|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, wrap("open "+path, err)
	}
	return fd, nil
}
