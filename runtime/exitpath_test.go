package runtime_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/runtime"
	"golang.org/x/sys/unix"
)

// TestExitStatusOnFullDisk: with the state dir on a full file system the
// shim cannot write exitStatus, yet the real statuses reach the daemon, on
// the exit FIFO: an exec's 3 and the init's 137, not a made-up 255.
func TestExitStatusOnFullDisk(t *testing.T) {
	e := newEnv(t)
	e.root = smallTmpfs(t, "4m")
	b := fixture.NewBundle(t, sleeper)
	c, initp := e.run(t, b, runtime.Stdio{})
	stdin, w := fifo(t, t.TempDir(), "stdin")
	ex, err := c.Exec(t.Context(), "x", execSpec("cat", "--", "exit", "3"), runtime.Stdio{Stdin: stdin})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, e.root)
	w.Close()
	if err := ex.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, ex, 3)
	if err := initp.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, initp, 137)
	for _, p := range []*runtime.Process{ex, initp} {
		if _, err := os.Stat(filepath.Join(c.Dir(), p.ID(), "exitStatus")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: exitStatus written on a full disk? (%v): the test did not fill it", p.ID(), err)
		}
		if at := p.ExitTime(); at.IsZero() || time.Since(at) > waitLimit {
			t.Errorf("%s: reap time %v", p.ID(), at)
		}
	}
	os.Remove(filepath.Join(e.root, "filler")) // room for the cleanup's own files
}

// TestCloseDoesNotWaitForDrainingShim: a process whose output nobody reads
// is killed; its exit is known at once and Close returns at once, while the
// shim still holds the unread output; the shim is reaped (no zombie) once
// it gives the output up.
func TestCloseDoesNotWaitForDrainingShim(t *testing.T) {
	e := newEnv(t)
	stdout, _ := fifo(t, t.TempDir(), "stdout") // opened, never read
	c, initp := e.run(t, fixture.NewBundle(t, fixture.Args("flood")), runtime.Stdio{Stdout: stdout})
	shimPid := readPidFile(t, filepath.Join(c.Dir(), "init", "shim.pid"))
	fixture.WaitBlockedWriting(t, initp.SystemPid(), waitLimit)
	if err := initp.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, initp, 137)
	start := time.Now()
	initp.Close()
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close took %v: it waited for the shim's drain", d)
	}
	if !fixture.Alive(shimPid) {
		t.Fatal("the shim is gone already: the test shows nothing")
	}
	fd, err := unix.PidfdOpen(shimPid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if !pollIn(fd, waitLimit) {
		t.Fatalf("the shim still runs %v after the exit with its output unread", waitLimit)
	}
	deadline := time.Now().Add(waitLimit)
	for fixture.Exists(shimPid) { // exited: the late reaper must collect it
		if time.Now().After(deadline) {
			t.Fatalf("shim %d exited but is not reaped (a zombie) after %v", shimPid, waitLimit)
		}
		time.Sleep(10 * time.Millisecond) // reaping has no event the test can wait on
	}
}

// smallTmpfs mounts a tmpfs of size under a temp dir, unmounted at the end
// of the test (after the containers in it are deleted).
func smallTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700,size="+size); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes dir/filler until the file system is full.
func fill(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill: %v", err)
			}
			break
		}
	}
	for { // the last partial pages too
		if _, err := f.Write(chunk[:512]); err != nil {
			return
		}
	}
}

func readPidFile(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return pid
}
