package main

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
)

func quietLog() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return logrus.NewEntry(l)
}

func TestPrepareStateDir(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "a", "state")
	if err := prepareDir(dir, "state dir", stateDirMode, quietLog()); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o711 {
		t.Fatalf("new state dir mode %v, want 0711", fi.Mode().Perm())
	}
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	if err := prepareDir(open, "state dir", stateDirMode, quietLog()); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(open); fi.Mode().Perm() != 0o755 {
		t.Fatalf("world-writable state dir now %v, want 0755", fi.Mode().Perm())
	}
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o600)
	if err := prepareDir(file, "state dir", stateDirMode, quietLog()); err == nil {
		t.Fatal("a file accepted as state dir")
	}
}

func TestLockStateDir(t *testing.T) {
	dir := t.TempDir()
	lock := func() (func(), error) {
		return lockDirs([]daemonDir{{path: dir, what: "state dir", mode: stateDirMode}}, quietLog())
	}
	release, err := lock()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, lockFileName))
	if strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("lock file holds %q", b)
	}
	_, err = lock()
	want := "another containerd is running with state dir " + dir + " (pid " + strconv.Itoa(os.Getpid()) + ")"
	if err == nil || err.Error() != want {
		t.Fatalf("second lock: %v, want %q", err, want)
	}
	release()
	again, err := lock()
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again()
}
