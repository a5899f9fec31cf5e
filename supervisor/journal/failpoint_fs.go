//go:build failpoints

package journal

import (
	"fmt"
	"os"
)

// WithSyncFault returns opts with a file layer whose fsyncs (of journal
// files and of the directory) fail with the error fail returns, or are real
// when it returns nil. It exists only in builds with -tags failpoints, for
// the supervisor's tests of a failing fsync; the daemon has no such hook.
func WithSyncFault(opts Options, fail func() error) Options {
	opts.fs = syncFaultFS{fail: fail}
	return opts
}

type syncFaultFS struct {
	osFS
	fail func() error
}

func (fs syncFaultFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	f, err := fs.osFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return syncFaultFile{file: f, fail: fs.fail}, nil
}

func (fs syncFaultFS) CreateTemp(dir, pattern string) (file, error) {
	f, err := fs.osFS.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return syncFaultFile{file: f, fail: fs.fail}, nil
}

func (fs syncFaultFS) SyncDir(dir string) error {
	if err := fs.fail(); err != nil {
		return fmt.Errorf("sync journal directory %s: %w", dir, &os.PathError{Op: "sync", Path: dir, Err: err})
	}
	return fs.osFS.SyncDir(dir)
}

type syncFaultFile struct {
	file
	fail func() error
}

func (f syncFaultFile) Sync() error {
	if err := f.fail(); err != nil {
		return &os.PathError{Op: "sync", Path: f.Name(), Err: err}
	}
	return f.file.Sync()
}
