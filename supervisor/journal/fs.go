package journal

import (
	"fmt"
	"io"
	"os"

	"github.com/evjournal/containerd/internal/atomicfile"
)

// file is what the journal needs of an open file. *os.File implements it;
// tests wrap it to inject write, sync and truncate errors.
type file interface {
	io.Reader
	io.Writer
	io.Seeker
	Name() string
	Sync() error
	Truncate(size int64) error
	Stat() (os.FileInfo, error)
	Chmod(mode os.FileMode) error
	Close() error
}

// fileSystem is the layer every journal write goes through, so that tests
// can make any step fail (ENOSPC on a write, EIO on an fsync, a rename or a
// directory sync that fails) and check what the journal does about it.
//
// This is why the journal does its crash-safe replacements (journal.id, an
// index, a rewritten segment) step by step here rather than through
// internal/atomicfile, which the state files and the shim use: each step
// must be injectable, and a rewritten segment's temp file stays open to be
// appended to after the rename. The real directory sync is atomicfile's.
type fileSystem interface {
	OpenFile(name string, flag int, perm os.FileMode) (file, error)
	CreateTemp(dir, pattern string) (file, error)
	Rename(oldpath, newpath string) error
	Remove(name string) error
	SyncDir(dir string) error
}

// osFS is the real file system.
type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // a nil *os.File must not become a non-nil interface
	}
	return f, nil
}

func (osFS) CreateTemp(dir, pattern string) (file, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (osFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }
func (osFS) Remove(name string) error             { return os.Remove(name) }

func (osFS) SyncDir(dir string) error {
	if err := atomicfile.SyncDir(dir); err != nil {
		return fmt.Errorf("sync journal directory %s: %w", dir, err)
	}
	return nil
}
