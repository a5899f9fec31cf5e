// Package atomicfile replaces files so that a crash leaves either the old
// content or the new one, never a mix or an empty file, and makes renames
// and creations in a directory durable. The daemon (state files, journal)
// and the shim (exit status) share it; it imports only os and path/filepath
// so the shim stays small.
package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Write replaces path with data, mode perm: it writes a temp file in the
// same dir, fsyncs it, renames it over path and fsyncs the dir. On an error
// path is unchanged and no temp file is left.
func Write(path string, data []byte, perm os.FileMode) error {
	return write(path, data, perm, true)
}

// WriteUnsynced replaces path with data as Write does, but without either
// fsync: a crash of the writer (or of the daemon reading it) leaves the
// old content or the new one, a crash of the machine may leave neither.
// For files nobody reads after a reboot (an ephemeral exec's, whose process
// cannot outlive the machine and whose exit is never reported after a
// restart): the fsyncs cost milliseconds on a disk-backed state dir.
func WriteUnsynced(path string, data []byte, perm os.FileMode) error {
	return write(path, data, perm, false)
}

func write(path string, data []byte, perm os.FileMode, sync bool) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	if err := writeClose(f, data, perm, sync); err != nil {
		os.Remove(f.Name())
		return &os.PathError{Op: "write", Path: path, Err: err}
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	if !sync {
		return nil
	}
	return SyncDir(dir)
}

func writeClose(f *os.File, data []byte, perm os.FileMode, sync bool) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// RetireDir moves dir whole into a new rm-* dir under trash (made if need
// be) and fsyncs dir's parent: dir leaves its place in one step, so a crash
// finds it there whole or gone, never half removed; the slow removal of its
// content follows, and after a crash the owner's sweep of trash does it.
// It returns the rm-* dir ("" if dir did not exist). When only the fsync
// fails, the rename took effect: the rm-* dir is returned with the error.
func RetireDir(dir, trash string) (string, error) {
	if err := os.MkdirAll(trash, 0o700); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(trash, "rm-")
	if err != nil {
		return "", err
	}
	if err := os.Rename(dir, filepath.Join(tmp, filepath.Base(dir))); err != nil {
		os.Remove(tmp)
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		return "", err
	}
	return tmp, SyncDir(filepath.Dir(dir))
}

// SyncDir fsyncs dir, so that the entries created, renamed or removed in it
// survive a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
