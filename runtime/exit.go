package runtime

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/evjournal/containerd/bundle"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// Exit statuses the daemon decides itself, when the shim could not write one.
const (
	StatusKilled  = 137 // the shim died; the daemon SIGKILLed the orphaned process
	StatusUnknown = 255 // the status cannot be known (see the reason)
)

// exitReasonFile holds why the daemon decided a status itself (daemon-only,
// listed in docs/shim-contract.md).
const exitReasonFile = "exitReason"

type exitInfo struct {
	status uint32
	reason string // empty when the shim recorded the real status
}

// ExitStatus returns how the process ended, in the shell convention. It is
// meant for a process whose exit FIFO has hung up (or was loaded dead).
//
// The shim's exitStatus file gives the real status (reason ""). Without it the
// shim was killed: if pid and start time still match, the daemon SIGKILLs the
// orphaned process and reports 137; if the process is gone or its pid reused,
// 255. A decided status is written to exitStatus (and the reason to
// exitReason) so it is the same after a restart. If the shim is still running
// (no status yet), it returns 255 with a reason and decides nothing.
func (p *Process) ExitStatus() (status uint32, reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exit == nil {
		e, final := p.decideExitLocked()
		if !final {
			return e.status, e.reason
		}
		p.exit, p.stopped = e, true
	}
	return p.exit.status, p.exit.reason
}

func (p *Process) decideExitLocked() (e *exitInfo, final bool) {
	dir := p.dir()
	if e, ok := readExit(dir); ok {
		p.reapShimLocked(0)
		return e, true
	}
	running := &exitInfo{StatusUnknown, "the shim is still running and has recorded no exit status"}
	if p.exitFD >= 0 && !p.stopped && !hungUp(p.exitFD, 0) {
		return running, false // asked too early: the exit FIFO has not hung up
	}
	if !p.waitShimGoneLocked(shimReapTimeout) {
		return running, false
	}
	if e, ok := readExit(dir); ok { // written just before the shim went
		return e, true
	}
	e = p.orphanExit()
	if err := saveExit(dir, e); err != nil {
		logrus.WithFields(logrus.Fields{"container": p.c.ID(), "pid": p.id}).WithError(err).Warn("cannot save the decided exit status")
	}
	return e, true
}

// waitShimGoneLocked waits up to timeout for the shim to be gone, reaping it
// when it is this daemon's child.
func (p *Process) waitShimGoneLocked(timeout time.Duration) bool {
	if p.shimPidfd >= 0 {
		p.reapShimLocked(timeout)
		return p.shimPidfd < 0
	}
	fd, err := openVerifiedPidfd(p.shimPid, p.shimStart)
	if err != nil {
		return true // gone, or its pid already names another process
	}
	defer unix.Close(fd)
	return pollFor(fd, unix.POLLIN, unix.POLLIN|unix.POLLHUP, timeout) || !sameProcess(p.shimPid, p.shimStart)
}

// orphanExit decides the status of a process whose shim died without
// recording one. A process still alive is SIGKILLed: 137. A zombie (its
// new parent has not reaped it yet) tells its own status. A process gone
// whose shim this daemon saw killed by SIGKILL is reported killed with it,
// 137, as v0.2.9 did. Anything else is 255 with the reason.
func (p *Process) orphanExit() *exitInfo {
	if p.pid == 0 {
		return &exitInfo{StatusUnknown, "the process start did not complete"}
	}
	st, err := readProcStat(p.pid)
	same := err == nil && p.startTime != 0 && st.startTime == p.startTime
	switch {
	case same && (st.state == 'Z' || st.state == 'X'):
		return p.zombieExit(st)
	case same:
		if err := signalVerified(p.pid, p.startTime, syscall.SIGKILL); err == nil {
			return &exitInfo{StatusKilled, fmt.Sprintf("the shim died; container process %d was killed", p.pid)}
		}
	case p.startTime == 0:
		return &exitInfo{StatusUnknown, fmt.Sprintf("the shim died before recording the start time of process %d", p.pid)}
	case p.shimKill == syscall.SIGKILL:
		return &exitInfo{StatusKilled, fmt.Sprintf("the shim was killed by SIGKILL; container process %d is gone with it", p.pid)}
	case err == nil:
		return &exitInfo{StatusUnknown, fmt.Sprintf("the shim died and pid %d now belongs to another process", p.pid)}
	}
	return &exitInfo{StatusUnknown, fmt.Sprintf("the shim died and container process %d vanished", p.pid)}
}

// zombieExit is the status of a container process that has exited but is
// not reaped yet (its shim, its parent, is gone): the kernel still holds it.
func (p *Process) zombieExit(st procStat) *exitInfo {
	if st.hasExit {
		return &exitInfo{uint32(shellStatus(st.exitCode)), fmt.Sprintf("the shim died; container process %d had exited (status read from /proc)", p.pid)}
	}
	if p.shimKill == syscall.SIGKILL {
		return &exitInfo{StatusKilled, fmt.Sprintf("the shim was killed by SIGKILL; container process %d died with it", p.pid)}
	}
	return &exitInfo{StatusUnknown, fmt.Sprintf("the shim died and container process %d exited with an unknown status", p.pid)}
}

// readExit reads exitStatus (and exitReason, if the daemon decided it).
func readExit(dir string) (*exitInfo, bool) {
	n, err := readUint(filepath.Join(dir, exitStatusFile))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			logrus.WithField("dir", dir).WithError(err).Warn("unreadable exit status")
		}
		return nil, false
	}
	reason, _ := bundle.ReadFile(filepath.Join(dir, exitReasonFile), 4<<10)
	return &exitInfo{status: uint32(n), reason: string(reason)}, true
}

// saveExit writes the reason first, so an exitStatus file never appears
// without the reason that goes with it.
func saveExit(dir string, e *exitInfo) error {
	if err := writeFileAtomic(filepath.Join(dir, exitReasonFile), []byte(e.reason), 0o600); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, exitStatusFile), []byte(strconv.FormatUint(uint64(e.status), 10)), 0o600)
}

// shellStatus is a wait status in the shell convention: the exit code, or
// 128 + the signal that killed the process.
func shellStatus(ws unix.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
