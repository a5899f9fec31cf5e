package runtime

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// A spare that refills the pool starts in the SCHED_IDLE class, so that its
// start (a fork, an exec, the Go runtime's start: about 1.5 ms of CPU) runs
// on CPU time nothing else wants. A refill begins while the exec that took
// a spare is still running (its command, its exit, its reply) and, with
// probes one after another, the next exec too. In the normal class the new
// spare's threads preempt the daemon, that exec's shim and runc on a small
// machine, on the very path spares are there to shorten: with idle-class
// refills an ExecSync of /bin/true took 0.35-0.57 ms less at the median,
// calls one after another on 2 CPUs (three runs, the two kinds of refill
// alternating in one daemon). When the spare is taken, every one of its
// threads gets back the scheduling the daemon's own thread had (wake),
// before it is given its process: what it runs competes as any process
// does, and a spare still starting under load is not left starved. A
// spare started for a process at once (the pool was empty) starts in the
// daemon's class.

// startIdleSpare starts a spare as startSpare does, from a thread of ours
// switched to SCHED_IDLE for the fork: the child inherits its class, and
// so do the threads it makes. If the thread cannot be switched, the spare
// starts in the daemon's class. If it cannot be switched back, it is not
// unlocked, so the runtime ends it with this goroutine rather than let
// other goroutines run at the idle class.
func startIdleSpare(path string) (*spare, error) {
	runtime.LockOSThread()
	normal, err := unix.SchedGetAttr(0, 0)
	if err == nil {
		err = unix.SchedSetAttr(0, &unix.SchedAttr{Policy: unix.SCHED_IDLE}, 0)
	}
	if err != nil {
		runtime.UnlockOSThread()
		return startSpare(path)
	}
	s, err := startSpare(path)
	if unix.SchedSetAttr(0, normal, 0) == nil {
		runtime.UnlockOSThread()
	}
	if err != nil {
		return nil, err
	}
	s.normal = normal
	return s, nil
}

// wakeRounds bounds how often wake reads a spare's threads: a spare makes
// a few threads while it starts, so a second round finds none new.
const wakeRounds = 4

// wake gives every thread of an idle-class spare the scheduling it was
// started from. Its threads are listed until a round finds no new one: a
// spare still starting may make one meanwhile (in the idle class, until
// set here). An error means the spare must not be used.
func (s *spare) wake() error {
	if s.normal == nil {
		return nil
	}
	set := map[int]bool{}
	for range wakeRounds {
		tids, err := threadsOf(s.sp.pid)
		if err != nil {
			return fmt.Errorf("spare shim %d: %w", s.sp.pid, err)
		}
		fresh := 0
		for _, tid := range tids {
			if set[tid] {
				continue
			}
			fresh++
			// ESRCH: the thread ended meanwhile.
			if err := unix.SchedSetAttr(tid, s.normal, 0); err != nil && err != unix.ESRCH {
				return fmt.Errorf("spare shim %d: scheduling of thread %d: %w", s.sp.pid, tid, err)
			}
			set[tid] = true
		}
		if fresh == 0 {
			s.normal = nil
			return nil
		}
	}
	return fmt.Errorf("spare shim %d: still making threads after %d rounds", s.sp.pid, wakeRounds)
}

// threadsOf lists the thread ids of process pid.
func threadsOf(pid int) ([]int, error) {
	d, err := os.Open("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	tids := make([]int, 0, len(names))
	for _, n := range names {
		if tid, err := strconv.Atoi(n); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}
