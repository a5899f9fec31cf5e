package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/evjournal/containerd/runtime"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// stateDirMode lets others traverse to the socket but not list or write.
const stateDirMode = 0o711

// prepareStateDir creates the state dir (0711) if missing. An existing one
// that is group- or world-writable is tightened: anyone who can write there
// could plant container state the daemon would restore.
func prepareStateDir(dir string, log *logrus.Entry) error {
	return prepareDir(dir, "state dir", stateDirMode, log)
}

// prepareJournalDir does the same for the journal dir (0700): anyone who
// could write there could plant events that clients replay.
func prepareJournalDir(dir string, log *logrus.Entry) error {
	return prepareDir(dir, "journal dir", 0o700, log)
}

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

// lockFileName is the lock held for the daemon's lifetime, inside the state dir.
const lockFileName = "containerd.lock"

// lockDir takes an exclusive flock on <dir>/containerd.lock and writes our
// pid into it. The returned file must stay open while the daemon runs; it
// is close-on-exec, so shims never inherit the lock. If another daemon
// holds it, the error names the dir (what: "state dir", "journal dir") and
// that daemon's pid.
func lockDir(dir, what string) (*os.File, error) {
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("another containerd is running with %s %s (pid %s)", what, dir, lockHolder(path))
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := writePid(f); err != nil {
		f.Close()
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
