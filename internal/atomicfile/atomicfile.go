// Package atomicfile replaces files so that a crash leaves either the old
// content or the new one, never a mix or an empty file, and makes renames
// and creations in a directory durable. The daemon (state files, journal)
// and the shim (exit status) share it; it imports only os and path/filepath
// so the shim stays small.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write replaces path with data, mode perm: it writes a temp file in the
// same dir, fsyncs it, renames it over path and fsyncs the dir. On an error
// path is unchanged and no temp file is left.
func Write(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	if err := writeSyncClose(f, data, perm); err != nil {
		os.Remove(f.Name())
		return &os.PathError{Op: "write", Path: path, Err: err}
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return SyncDir(dir)
}

func writeSyncClose(f *os.File, data []byte, perm os.FileMode) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
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
