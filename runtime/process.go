package runtime

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/internal/errmark"
	"github.com/evjournal/containerd/specs"
	"golang.org/x/sys/unix"
)

// ProcessState is whether a process's shim still holds it.
type ProcessState int

const (
	// Running: the shim is alive (the exit FIFO has not hung up).
	Running ProcessState = iota
	// Stopped: the shim is gone; ExitStatus tells how the process ended.
	Stopped
)

func (s ProcessState) String() string {
	if s == Stopped {
		return "stopped"
	}
	return "running"
}

// shimReapTimeout bounds the wait for a shim that has hung up its exit FIFO
// (and so is exiting) to become reapable.
const shimReapTimeout = 10 * time.Second

// Process is the init or one exec of a container, held by one shim.
type Process struct {
	c         *Container
	id        string
	rec       processRecord // immutable
	pid       int           // container process host pid; 0 if the start never completed
	startTime uint64        // of pid, from the shim; 0 if unknown
	shimPid   int
	shimStart uint64

	reopenMu sync.Mutex // one ReopenLog at a time

	mu        sync.Mutex
	exitFD    int            // guarded by mu: exit FIFO read end, -1 once closed or when loaded dead
	controlFD int            // guarded by mu: control FIFO (read-write), -1 once closed
	shimPidfd int            // guarded by mu: pidfd of the shim when it is this daemon's child, else -1
	shimKill  syscall.Signal // guarded by mu: the signal that killed the shim, when this daemon reaped it
	stopped   bool           // guarded by mu: the exit has been observed
	exit      *exitInfo      // guarded by mu: the decided exit status, once known
}

// ID is "init" or the exec id.
func (p *Process) ID() string { return p.id }

// Container is the container the process belongs to.
func (p *Process) Container() *Container { return p.c }

// SystemPid is the host pid of the container process.
func (p *Process) SystemPid() int { return p.pid }

// Spec is the OCI process the container runs.
func (p *Process) Spec() specs.ProcessSpec { return p.rec.Process }

// Stdio are the host paths the shim copies the process's stdio to and from.
func (p *Process) Stdio() Stdio { return p.rec.stdio() }

// Terminal reports whether the process has a pty.
func (p *Process) Terminal() bool { return p.rec.Terminal }

func (p *Process) dir() string { return filepath.Join(p.c.Dir(), p.id) }

// OOMID is the id the container's memory cgroup is watched under
// (monitor.OOMScoped): every process of a container lives in its cgroup.
func (p *Process) OOMID() string { return p.c.ID() }

// ExitFD is the read end of the exit FIFO, for the monitor's epoll set; it
// hangs up when the shim exits. -1 once closed, or for a process loaded dead.
func (p *Process) ExitFD() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitFD
}

// State is Stopped once the shim is gone, or when the process was loaded
// dead. It looks at the exit FIFO (without consuming anything) and at the
// shim process itself (pid and start time), so an exit the FIFO cannot
// show (it was replaced, or the monitor missed it) is still seen by the
// reconcile pass.
func (p *Process) State() ProcessState {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stopped && p.exitFD >= 0 && hungUp(p.exitFD, 0) {
		p.stopped = true
	}
	if !p.stopped && (p.shimPid > 0 || p.pid > 0) && !p.shimAlive() {
		p.stopped = true
	}
	if p.stopped {
		return Stopped
	}
	return Running
}

// Signal sends sig to the container process, and only to it, through a pidfd
// verified against the recorded start time: a process that is gone, or whose
// pid now names another process, gives "no such process" (ErrNotFound).
func (p *Process) Signal(sig syscall.Signal) error {
	if p.State() == Stopped {
		return errmark.Mark(errNoProcess, errdefs.ErrNotFound)
	}
	err := signalVerified(p.pid, p.startTime, sig)
	if err == errNoProcess {
		return errmark.Mark(errNoProcess, errdefs.ErrNotFound)
	}
	return err
}

// Resize asks the shim to resize the process's pty (ignored without one).
func (p *Process) Resize(w, h uint32) error { return p.control(1, w, h) }

// CloseStdin asks the shim to drop its keep-alive handle on the stdin FIFO,
// so the process sees EOF once the client has closed its end too.
func (p *Process) CloseStdin() error { return p.control(0, 0, 0) }

func (p *Process) control(kind int, w, h uint32) error {
	return p.writeControl(fmt.Sprintf("%d %d %d\n", kind, w, h))
}

// MarkExitPublished records that the exit event is journaled, so that a
// restarted daemon does not publish it again.
func (p *Process) MarkExitPublished() error { return p.mark(exitPublishedFile) }

// mark writes a marker file (its content: when) into the process dir.
func (p *Process) mark(name string) error {
	if err := writeMarker(filepath.Join(p.dir(), name)); err != nil {
		return fmt.Errorf("container %q: process %q: %w", p.c.ID(), p.id, err)
	}
	return nil
}

// writeMarker records, atomically, that something happened, and when.
func writeMarker(path string) error {
	return writeFileAtomic(path, []byte(time.Now().UTC().Format(time.RFC3339Nano)), 0o600)
}

// ExitPublished reports whether MarkExitPublished was done (by any daemon run).
func (p *Process) ExitPublished() bool { return exists(filepath.Join(p.dir(), exitPublishedFile)) }

// Close closes the daemon's fds of the process. It never waits for the
// shim: one that reported the exit may still be handing its last output to
// a slow client (a few seconds, bounded by the shim). If the shim is this
// daemon's child it is reaped now if gone, else by the late reaper when it
// exits (reaplater.go), so it never stays a zombie.
func (p *Process) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reapLaterLocked()
	closeFD(&p.exitFD)
	closeFD(&p.controlFD)
	return nil
}

// reapLaterLocked reaps the shim now if it is gone, else hands it to the
// late reaper, which reaps it when it exits.
func (p *Process) reapLaterLocked() {
	p.reapShimLocked(0)
	if p.shimPidfd >= 0 {
		lateReaper.add(p.shimPidfd)
		p.shimPidfd = -1
	}
}

// reapShimLocked reaps the shim if it is this daemon's child and exits
// within wait; the pidfd is kept while the shim still runs.
func (p *Process) reapShimLocked(wait time.Duration) {
	if p.shimPidfd < 0 {
		return
	}
	if reaped, sig := reapPidfdSignal(p.shimPidfd, wait); reaped {
		p.shimKill = sig
		closeFD(&p.shimPidfd)
	}
}

func closeFD(fd *int) {
	if *fd >= 0 {
		unix.Close(*fd)
		*fd = -1
	}
}

// openFifos opens the exit FIFO read-only and the control FIFO read-write,
// both non-blocking and close-on-exec.
func openFifos(dir string) (exitFD, controlFD int, err error) {
	exitFD, err = unix.Open(filepath.Join(dir, exitFifo), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, -1, &os.PathError{Op: "open", Path: filepath.Join(dir, exitFifo), Err: err}
	}
	controlFD, err = unix.Open(filepath.Join(dir, controlFifo), unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(exitFD)
		return -1, -1, &os.PathError{Op: "open", Path: filepath.Join(dir, controlFifo), Err: err}
	}
	return exitFD, controlFD, nil
}

// MarkStarted records that the process's start was published (start-process
// for an exec), so that a restarted daemon can tell it from an exec whose
// start a crash interrupted, which no client was ever told about.
func (p *Process) MarkStarted() error { return p.mark(startedFile) }

// Started reports whether MarkStarted was done (by any daemon run).
func (p *Process) Started() bool { return exists(filepath.Join(p.dir(), startedFile)) }
