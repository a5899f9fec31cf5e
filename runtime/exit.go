package runtime

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	reason string    // empty when the shim recorded the real status
	at     time.Time // when the shim reaped the process; zero if unknown
}

// ExitStatus returns how the process ended, in the shell convention. It is
// meant for a process whose exit FIFO has hung up (or was loaded dead).
//
// The status line the shim wrote on the exit FIFO at the reap gives the real
// status (reason ""), even when no file could be written; after a daemon
// restart (the FIFO's content is gone) the shim's exitStatus file does. Without either the
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

// ExitTime is when the shim reaped the process, once ExitStatus is known:
// from the exit FIFO, or after a restart the time exitStatus was written.
// Zero when unknown (the shim died first).
func (p *Process) ExitTime() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exit == nil {
		return time.Time{}
	}
	return p.exit.at
}

func (p *Process) decideExitLocked() (e *exitInfo, final bool) {
	if e, ok := p.readExitLineLocked(); ok {
		p.stopped = true
		p.reapLaterLocked() // the shim may still be draining output
		return e, true
	}
	dir := p.dir()
	if e, ok := readExit(dir); ok {
		p.reapShimLocked(0)
		return e, true
	}
	running := &exitInfo{status: StatusUnknown, reason: "the shim is still running and has recorded no exit status"}
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
// recording one. A process still alive is SIGKILLed: 137. When this daemon
// saw the shim die of SIGKILL, the process is reported killed with it, 137,
// whatever became of it since: as v0.2.9 did, and the same every time,
// although the process may have died first of its own accord on the dead
// shim's pipes (SIGPIPE, or EPIPE and an exit status of its own); see
// shimKilledExit. Otherwise a zombie (its new parent has not reaped it yet)
// tells its own status, and anything else is 255 with the reason.
func (p *Process) orphanExit() *exitInfo {
	if p.pid == 0 {
		return &exitInfo{status: StatusUnknown, reason: "the process start did not complete"}
	}
	st, err := readProcStat(p.pid)
	same := err == nil && p.startTime != 0 && st.startTime == p.startTime
	switch {
	case p.shimKill == syscall.SIGKILL:
		return p.shimKilledExit(same && st.state != 'Z' && st.state != 'X')
	case same && (st.state == 'Z' || st.state == 'X'):
		return p.zombieExit(st)
	case same:
		if err := signalVerified(p.pid, p.startTime, syscall.SIGKILL); err == nil {
			return &exitInfo{status: StatusKilled, reason: fmt.Sprintf("the shim died; container process %d was killed", p.pid)}
		}
	case p.startTime == 0:
		return &exitInfo{status: StatusUnknown, reason: fmt.Sprintf("the shim died before recording the start time of process %d", p.pid)}
	case err == nil:
		return &exitInfo{status: StatusUnknown, reason: fmt.Sprintf("the shim died and pid %d now belongs to another process", p.pid)}
	}
	return &exitInfo{status: StatusUnknown, reason: fmt.Sprintf("the shim died and container process %d vanished", p.pid)}
}

// shimKilledExit is the status of a process whose shim this daemon saw
// killed by SIGKILL: 137. Whether the process died before the daemon
// looked is a race with the kernel (the shim's death closes the process's
// stdio pipes), so its own status would differ from run to run, and a
// client that killed the shim expects 137. One still running is killed.
func (p *Process) shimKilledExit(running bool) *exitInfo {
	if running && signalVerified(p.pid, p.startTime, syscall.SIGKILL) == nil {
		return &exitInfo{status: StatusKilled, reason: fmt.Sprintf("the shim was killed by SIGKILL; container process %d was killed", p.pid)}
	}
	return &exitInfo{status: StatusKilled, reason: fmt.Sprintf("the shim was killed by SIGKILL; container process %d died with it", p.pid)}
}

// zombieExit is the status of a container process that has exited but is
// not reaped yet (its shim, its parent, is gone): the kernel still holds it.
func (p *Process) zombieExit(st procStat) *exitInfo {
	if st.hasExit {
		return &exitInfo{status: uint32(shellStatus(st.exitCode)), reason: fmt.Sprintf("the shim died; container process %d had exited (status read from /proc)", p.pid)}
	}
	return &exitInfo{status: StatusUnknown, reason: fmt.Sprintf("the shim died and container process %d exited with an unknown status", p.pid)}
}

// exitLineMax bounds the read of the exit FIFO: the shim writes one line,
// "<status> <reap time, unix ns>\n", far shorter.
const exitLineMax = 64

// readExitLineLocked takes the status line the shim wrote on the exit FIFO
// when it reaped the process (docs/shim-contract.md). Nothing to read (the
// shim died before the reap, or it wrote while no daemon held the FIFO) or
// a malformed line is not an exit status: the caller falls back to the file.
func (p *Process) readExitLineLocked() (*exitInfo, bool) {
	if p.exitFD < 0 {
		return nil, false
	}
	buf := make([]byte, exitLineMax)
	n, err := unix.Read(p.exitFD, buf)
	if err != nil || n <= 0 {
		return nil, false
	}
	e, err := parseExitLine(buf[:n])
	if err != nil {
		logrus.WithFields(logrus.Fields{"container": p.c.ID(), "pid": p.id}).WithError(err).Warn("exit FIFO: ignoring a malformed status line")
		return nil, false
	}
	return e, true
}

// parseExitLine parses "<status> <unix ns>\n".
func parseExitLine(line []byte) (*exitInfo, error) {
	s, ok := strings.CutSuffix(string(line), "\n")
	f := strings.Fields(s)
	if !ok || len(f) != 2 {
		return nil, fmt.Errorf("want \"<status> <unix ns>\\n\", got %q", line)
	}
	status, err := strconv.ParseUint(f[0], 10, 32)
	if err != nil || status > 255+128 {
		return nil, fmt.Errorf("status %q out of range", f[0])
	}
	ns, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || ns <= 0 {
		return nil, fmt.Errorf("reap time %q: not a positive unix time", f[1])
	}
	return &exitInfo{status: uint32(status), at: time.Unix(0, ns)}, nil
}

// readExit reads exitStatus (and exitReason, if the daemon decided it); the
// file's mtime is when the shim wrote it, right after the reap.
func readExit(dir string) (*exitInfo, bool) {
	path := filepath.Join(dir, exitStatusFile)
	n, err := readUint(path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			logrus.WithField("dir", dir).WithError(err).Warn("unreadable exit status")
		}
		return nil, false
	}
	e := &exitInfo{status: uint32(n)}
	if reason, _ := bundle.ReadFile(filepath.Join(dir, exitReasonFile), 4<<10); len(reason) > 0 {
		e.reason = string(reason)
	} else if st, err := os.Stat(path); err == nil {
		e.at = st.ModTime()
	}
	return e, true
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
