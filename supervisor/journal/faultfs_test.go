package journal

import (
	"os"
	"sync"
)

// faultFS is the real file system with errors on demand: set(op, err) makes
// every later op fail with err until clear(op). The ops are "create" (temp
// files), "open" (segments), "write", "sync", "truncate", "rename", "syncdir". A failing write
// first writes half its bytes, as a disk filling up mid-record does.
type faultFS struct {
	osFS
	mu     sync.Mutex
	fail   map[string]error
	writes int // write calls on its files, failed ones included
}

func newFaultFS() *faultFS {
	return &faultFS{fail: map[string]error{}}
}

func (fs *faultFS) set(op string, err error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.fail[op] = err
}

func (fs *faultFS) clear(op string) { fs.set(op, nil) }

func (fs *faultFS) writeCount() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.writes
}

func (fs *faultFS) check(op string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.fail[op]
}

func (fs *faultFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	if err := fs.check("open"); err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	f, err := fs.osFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{file: f, fs: fs}, nil
}

func (fs *faultFS) CreateTemp(dir, pattern string) (file, error) {
	if err := fs.check("create"); err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	f, err := fs.osFS.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return &faultFile{file: f, fs: fs}, nil
}

func (fs *faultFS) Rename(oldpath, newpath string) error {
	if err := fs.check("rename"); err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	return fs.osFS.Rename(oldpath, newpath)
}

func (fs *faultFS) SyncDir(dir string) error {
	if err := fs.check("syncdir"); err != nil {
		return &os.PathError{Op: "sync", Path: dir, Err: err}
	}
	return fs.osFS.SyncDir(dir)
}

type faultFile struct {
	file
	fs *faultFS
}

func (f *faultFile) Write(b []byte) (int, error) {
	f.fs.mu.Lock()
	f.fs.writes++
	f.fs.mu.Unlock()
	if err := f.fs.check("write"); err != nil {
		n, _ := f.file.Write(b[:len(b)/2])
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: err}
	}
	return f.file.Write(b)
}

func (f *faultFile) Sync() error {
	if err := f.fs.check("sync"); err != nil {
		return &os.PathError{Op: "sync", Path: f.Name(), Err: err}
	}
	return f.file.Sync()
}

func (f *faultFile) Truncate(size int64) error {
	if err := f.fs.check("truncate"); err != nil {
		return &os.PathError{Op: "truncate", Path: f.Name(), Err: err}
	}
	return f.file.Truncate(size)
}
