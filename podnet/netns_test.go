package podnet

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
)

// nsInode identifies a namespace: two paths name the same one when their
// inodes match.
func nsInode(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func TestNetNSLifecycle(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	ns, err := NewNetNS(dir, "pod1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Remove() })
	if ns.Path() != filepath.Join(dir, "pod1") {
		t.Fatalf("path %s", ns.Path())
	}
	host := nsInode(t, "/proc/self/ns/net")
	pinned := nsInode(t, ns.Path())
	if pinned == host {
		t.Fatal("pinned namespace is the host's")
	}
	if _, err := NewNetNS(dir, "pod1"); !errdefs.IsAlreadyExists(err) {
		t.Fatalf("second NewNetNS: %v, want already exists", err)
	}
	if _, err := OpenNetNS(ns.Path()); err != nil {
		t.Fatalf("OpenNetNS: %v", err)
	}

	var inside uint64
	if err := ns.Do(func() error { inside = nsInode(t, "/proc/thread-self/ns/net"); return nil }); err != nil {
		t.Fatal(err)
	}
	if inside != pinned {
		t.Fatalf("Do ran in namespace %d, want %d", inside, pinned)
	}
	want := errors.New("from fn")
	if err := ns.Do(func() error { return want }); err != want {
		t.Fatalf("Do returned %v, want fn's error", err)
	}

	if err := ns.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ns.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("pin file still there: %v", err)
	}
	if err := ns.Remove(); err != nil {
		t.Fatalf("second Remove: %v", err)
	}
	if _, err := OpenNetNS(ns.Path()); !errdefs.IsNotFound(err) {
		t.Fatalf("OpenNetNS after Remove: %v, want not found", err)
	}
}

// TestDoLeavesThreadsClean runs Do many times, then checks that no thread
// of the process is left in a pod's namespace.
func TestDoLeavesThreadsClean(t *testing.T) {
	needRoot(t)
	ns, err := NewNetNS(t.TempDir(), "pod")
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Remove()
	for range 50 {
		if err := ns.Do(func() error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	// This goroutine is not locked, so its thread is one the runtime
	// shares: it must be in the host's namespace.
	host := nsInode(t, "/proc/thread-self/ns/net")
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		var st unix.Stat_t
		// A thread may exit between ReadDir and Stat.
		if unix.Stat("/proc/self/task/"+task.Name()+"/ns/net", &st) == nil && st.Ino != host {
			t.Errorf("thread %s is in namespace %d, not the host's %d", task.Name(), st.Ino, host)
		}
	}
}

// TestRemoveNetNSByPath is the restart case: only the path is known.
func TestRemoveNetNSByPath(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	ns, err := NewNetNS(dir, "pod")
	if err != nil {
		t.Fatal(err)
	}
	if err := RemoveNetNS(ns.Path()); err != nil {
		t.Fatal(err)
	}
	if err := RemoveNetNS(ns.Path()); err != nil {
		t.Fatalf("again: %v", err)
	}
	if err := RemoveNetNS(filepath.Join(dir, "never")); err != nil {
		t.Fatalf("missing file: %v", err)
	}
}

func TestNewNetNSBadName(t *testing.T) {
	for _, name := range []string{"", ".", "..", "a/b"} {
		if _, err := NewNetNS(t.TempDir(), name); !errdefs.IsInvalidArgument(err) {
			t.Errorf("name %q: %v, want invalid argument", name, err)
		}
	}
}

// TestPinNetNS pins the namespace a process made for itself: the pin
// holds it after the process is gone, and a taken name is refused.
func TestPinNetNS(t *testing.T) {
	needRoot(t)
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	want := nsInode(t, fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid))
	dir := t.TempDir()
	ns, err := PinNetNS(dir, "pod1", cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Remove() })
	if _, err := PinNetNS(dir, "pod1", cmd.Process.Pid); !errdefs.IsAlreadyExists(err) {
		t.Fatalf("second PinNetNS: %v, want already exists", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if got := nsInode(t, ns.Path()); got != want {
		t.Fatalf("pinned namespace %d, want the process's %d", got, want)
	}
	if _, err := PinNetNS(dir, "gone", cmd.Process.Pid); err == nil {
		t.Fatal("PinNetNS of a reaped pid succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "gone")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed pin left its file: %v", err)
	}
}
