package main

import (
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/evjournal/containerd/internal/pidfdwait"
)

// reaper is the shim's only waiter for children. As a child subreaper the
// shim inherits the container process and every orphan under it, besides the
// runc commands it starts; one loop driven by SIGCHLD reaps them all with
// wait4(-1) and hands each status to whoever waits for that pid.
//
// Nothing else may wait: no os/exec Wait that could steal a status from the
// loop, or have its own stolen. A command is started with mu held and its
// pid registered before mu is released, and the loop reaps only with mu
// held, so a child is never reaped before its waiter is known.
type reaper struct {
	mu sync.Mutex
	// waiters maps a pid to the channel (capacity 1) that gets its status.
	// Guarded by mu.
	waiters map[int]chan unix.WaitStatus
	// selective, while true, makes the loop reap only the pids in waiters:
	// until the shim has claimed the container process and read its start
	// time, that process must stay visible in /proc (as a zombie at worst).
	// Guarded by mu.
	selective bool

	sigs chan os.Signal
	stop chan struct{}
	done chan struct{}
}

// newReaper starts the reaper loop. It begins selective (see the field).
func newReaper() *reaper {
	r := &reaper{
		waiters:   map[int]chan unix.WaitStatus{},
		selective: true,
		sigs:      make(chan os.Signal, 1),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	signal.Notify(r.sigs, unix.SIGCHLD)
	go r.loop()
	return r
}

func (r *reaper) loop() {
	defer close(r.done)
	for {
		select {
		case <-r.sigs:
			r.reap()
		case <-r.stop:
			return
		}
	}
}

// start runs the program at path with argv and attr, and returns its pid
// and the channel that will get its wait status.
func (r *reaper) start(path string, argv []string, attr *syscall.ProcAttr) (int, <-chan unix.WaitStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := syscall.ForkExec(path, argv, attr)
	if err != nil {
		return 0, nil, err
	}
	return pid, r.watchLocked(pid), nil
}

// claim returns the channel that will get the status of pid, a child the
// shim did not start itself (the container process, inherited from runc).
// inspect, if not nil, runs with the reaper's lock held, once pid is
// registered: the loop reaps only with the lock held, so pid cannot be
// reaped (and its number reused) meanwhile, and what inspect reads of
// /proc/<pid> is that process's, a zombie at worst. Without it, a SIGCHLD
// handled right after the registration could reap an exec that exited at
// once before its start time was read (e2e TestCRIPod failed so once).
func (r *reaper) claim(pid int, inspect func()) <-chan unix.WaitStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := r.watchLocked(pid)
	if inspect != nil {
		inspect()
	}
	return ch
}

func (r *reaper) watchLocked(pid int) chan unix.WaitStatus {
	ch := make(chan unix.WaitStatus, 1)
	r.waiters[pid] = ch
	return ch
}

// signal sends sig to pid, a child claimed or started through the reaper,
// only while it is not reaped yet: the loop reaps only with mu held, so
// until then pid still names that child (a zombie at worst), and once it is
// reaped the pid may name any process. It reports whether sig was sent.
func (r *reaper) signal(pid int, sig unix.Signal) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, waited := r.waiters[pid]; !waited {
		return false
	}
	return unix.Kill(pid, sig) == nil
}

// watchExit has pid, a child claimed through the reaper, reaped as soon as
// it becomes a zombie, woken by its pidfd (internal/pidfdwait): about
// 0.2 ms sooner, on the bench's exits, than through SIGCHLD's signal
// handler, os/signal's goroutine and the loop. SIGCHLD stays the wake for
// every other child, and for this one when no pidfd can be had; whichever
// comes first reaps, under mu, once. Call it before pid can be reaped.
func (r *reaper) watchExit(pid int) {
	w, err := pidfdwait.Open(pid)
	if err != nil {
		return
	}
	go func() {
		w.Wait()
		r.reap()
	}()
}

// reapAll ends the selective phase: from now on every child is reaped,
// including any that exited during it.
func (r *reaper) reapAll() {
	r.mu.Lock()
	r.selective = false
	r.mu.Unlock()
	r.reap()
}

// reap collects every exited child that may be reaped now. SIGCHLD
// coalesces, so one signal may stand for many exits: loop until none is left.
func (r *reaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.selective {
		for pid := range r.waiters {
			r.wait(pid)
		}
		return
	}
	for r.wait(-1) {
	}
}

// wait reaps pid (or any child for -1) without blocking and delivers its
// status; it reports whether a child was reaped.
func (r *reaper) wait(pid int) bool {
	var ws unix.WaitStatus
	got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
	for err == unix.EINTR {
		got, err = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
	}
	if err != nil || got <= 0 {
		return false
	}
	if ch, ok := r.waiters[got]; ok {
		delete(r.waiters, got)
		ch <- ws
	}
	return true
}
