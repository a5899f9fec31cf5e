package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/evjournal/containerd/runtime"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// stateDirMode lets others traverse to the socket but not list or write:
// anyone who could write there could plant container state the daemon
// would restore.
const stateDirMode = 0o711

// journalDirMode: anyone who could write in the journal dir could plant
// events that clients replay.
const journalDirMode = 0o700

// prepareDir creates dir with mode if missing. An existing one that is
// group- or world-writable is tightened (the modes above say why).
func prepareDir(dir, what string, mode os.FileMode, log *logrus.Entry) error {
	if err := os.MkdirAll(dir, mode); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s %s is not a directory", what, dir)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		if err := os.Chmod(dir, perm&^0o022); err != nil {
			return fmt.Errorf("%s %s is writable by others (%v) and cannot be fixed: %w", what, dir, perm, err)
		}
		log.WithField("dir", dir).Warnf("%s was writable by others (%v): removed group and world write", what, perm)
	}
	return runtime.PrepareRoot(dir)
}

// lockFileName is the lock held for the daemon's lifetime in each of its
// dirs. Its file is close-on-exec, so shims never inherit the lock.
const lockFileName = "containerd.lock"

// daemonDir is a dir the daemon owns alone: the state dir, the journal dir.
type daemonDir struct {
	path string
	what string // "state dir", "journal dir": how errors name it
	mode os.FileMode
}

// lockDirs prepares and locks dirs for the daemon's lifetime (release
// closes the locks). The locks of the dirs that exist are taken before
// anything is made, so that a daemon refused because another holds one of
// them changes nothing on disk: no dir or lock file made, no mode
// tightened, no pid written.
func lockDirs(dirs []daemonDir, log *logrus.Entry) (release func(), err error) {
	locks := make([]*os.File, len(dirs))
	release = func() {
		for _, f := range locks {
			if f != nil {
				f.Close()
			}
		}
	}
	for i, d := range dirs {
		if locks[i], err = tryLock(d, false); err != nil {
			release()
			return nil, err
		}
	}
	if err := prepareAndLock(dirs, locks, log); err != nil {
		release()
		return nil, err
	}
	return release, nil
}

// prepareAndLock makes and tightens each dir, locks those whose lock file
// did not exist yet, then writes the daemon's pid into every lock.
func prepareAndLock(dirs []daemonDir, locks []*os.File, log *logrus.Entry) error {
	for i, d := range dirs {
		if err := prepareDir(d.path, d.what, d.mode, log); err != nil {
			return err
		}
		if locks[i] != nil {
			continue
		}
		var err error
		if locks[i], err = tryLock(d, true); err != nil {
			return err
		}
	}
	for i, f := range locks {
		if err := writePid(f); err != nil {
			return fmt.Errorf("lock %s: %w", filepath.Join(dirs[i].path, lockFileName), err)
		}
	}
	return nil
}

// tryLock opens <dir>/containerd.lock, made if create, and takes an
// exclusive flock on it without waiting. Without create, a missing lock
// file (or dir) is nil and no error: nobody holds it. If another daemon
// holds it, the error names the dir and that daemon's pid.
func tryLock(d daemonDir, create bool) (*os.File, error) {
	path := filepath.Join(d.path, lockFileName)
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if !create && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR)) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("another containerd is running with %s %s (pid %s)", d.what, d.path, lockHolder(path))
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}

func writePid(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return err
}

// lockHolder reads the pid the holder wrote, or "unknown".
func lockHolder(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	if pid := strings.TrimSpace(string(b)); pid != "" {
		return pid
	}
	return "unknown"
}
