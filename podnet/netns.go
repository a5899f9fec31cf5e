// Package podnet gives a pod its network: a network namespace pinned to a
// file, so that it outlives the processes in it and the daemon, and the CNI
// plugins that plug that namespace into the node's pod network.
package podnet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
)

// NetNS is a network namespace pinned by a bind mount on a file. The file,
// not a process, keeps the namespace alive: runc joins it by path, and a
// restarted daemon finds it again by path.
type NetNS struct {
	path string
}

// NewNetNS creates a network namespace and pins it at dir/name. The name
// must not exist yet (ErrAlreadyExists otherwise).
func NewNetNS(dir, name string) (*NetNS, error) {
	path, err := pinPoint(dir, name)
	if err != nil {
		return nil, err
	}
	if err := inNetNS(unshare, func() error { return pin(path) }); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("netns %s: %w", path, err)
	}
	return &NetNS{path: path}, nil
}

// PinNetNS pins at dir/name the network namespace process pid is in: one
// a pod's pause process made inside the pod's user namespace, which must
// own it (for sysfs and the net sysctls), so the runtime cannot make it
// beforehand. The name must not exist yet (ErrAlreadyExists otherwise).
func PinNetNS(dir, name string, pid int) (*NetNS, error) {
	path, err := pinPoint(dir, name)
	if err != nil {
		return nil, err
	}
	src := fmt.Sprintf("/proc/%d/ns/net", pid)
	if err := unix.Mount(src, path, "", unix.MS_BIND, ""); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("netns %s: bind mount %s: %w", path, src, err)
	}
	return &NetNS{path: path}, nil
}

// pinPoint makes the empty file dir/name a namespace is bound onto.
func pinPoint(dir, name string) (string, error) {
	if name == "" || name != filepath.Base(name) || name == "." || name == ".." {
		return "", fmt.Errorf("netns name %q: %w", name, errdefs.ErrInvalidArgument)
	}
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return "", fmt.Errorf("netns dir: %w", err)
	}
	path := filepath.Join(dir, name)
	// O_EXCL: two pods must never share a pin by accident.
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("netns %s: %w", path, errdefs.ErrAlreadyExists)
		}
		return "", fmt.Errorf("netns mount point: %w", err)
	}
	return path, f.Close()
}

// OpenNetNS returns the pinned namespace at path, as after a daemon restart.
// It fails with ErrNotFound unless path is a mounted network namespace.
func OpenNetNS(path string) (*NetNS, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, fmt.Errorf("netns %s: %w", path, errdefs.ErrNotFound)
		}
		return nil, fmt.Errorf("netns %s: %w", path, err)
	}
	if st.Type != unix.NSFS_MAGIC {
		return nil, fmt.Errorf("netns %s is not a namespace mount: %w", path, errdefs.ErrNotFound)
	}
	return &NetNS{path: path}, nil
}

// Path is the file pinning the namespace; runc's spec and CNI take it.
func (n *NetNS) Path() string { return n.path }

// Remove unpins and deletes the namespace file. The namespace itself goes
// when its last process exits too. Removing twice is not an error.
func (n *NetNS) Remove() error { return RemoveNetNS(n.path) }

// RemoveNetNS unpins and deletes a namespace file given only its path, as a
// restarted daemon knows it. A missing or already unmounted file is fine.
func RemoveNetNS(path string) error {
	// MNT_DETACH: a process still holding the namespace must not make the
	// removal fail; the namespace lives on only as long as that process.
	err := unix.Unmount(path, unix.MNT_DETACH)
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount netns %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove netns %s: %w", path, err)
	}
	return nil
}

// Do runs fn on an OS thread that is inside the namespace. Only fn's own
// goroutine is inside: goroutines it starts run elsewhere. Sockets fn
// creates stay in the namespace after it returns, whoever uses them.
func (n *NetNS) Do(fn func() error) error {
	enter := func() error {
		f, err := os.Open(n.path)
		if err != nil {
			return fmt.Errorf("open netns: %w", err)
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("enter netns %s: %w", n.path, err)
		}
		return nil
	}
	return inNetNS(enter, fn)
}

// inNetNS runs enter then fn on a goroutine locked to its OS thread and
// never unlocked: when the goroutine ends the Go runtime ends the thread,
// so a thread in a pod's namespace is never handed to other goroutines.
// The thread goes back to its first namespace anyway, because the runtime
// cannot end the process's main thread and parks it instead: left in the
// pod's namespace it would keep that namespace alive after Remove, and
// /proc/<daemon pid>/ns/net would name it. (While a thread is locked, new
// threads are cloned from a clean template thread, not from it.)
func inNetNS(enter, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			done <- fmt.Errorf("open own netns: %w", err)
			return
		}
		defer orig.Close()
		if err := enter(); err != nil {
			done <- err
			return
		}
		err = fn()
		// A failure here leaves only this thread behind, which then exits.
		_ = unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET)
		done <- err
	}()
	return <-done
}

// unshare moves the calling (locked) thread into a new network namespace.
func unshare() error {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	return nil
}

// pin bind-mounts the calling thread's network namespace onto path.
func pin(path string) error {
	self := fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
	if err := unix.Mount(self, path, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind mount: %w", err)
	}
	return nil
}
