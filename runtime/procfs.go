package runtime

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// procStat is what this package needs from /proc/<pid>/stat.
type procStat struct {
	state     byte   // field 3: R, S, D, Z, X...
	startTime uint64 // field 22: start time in clock ticks since boot
	// exiting: PF_EXITING in field 9 (flags). The kernel sets it first in
	// do_exit, before it moves the task out of its cgroups; the state
	// turns Z only later.
	exiting bool
	// exitCode is field 52, the wait status of a zombie (Linux >= 3.5);
	// hasExit is false when the field is missing.
	exitCode unix.WaitStatus
	hasExit  bool
}

// readProcStat parses /proc/<pid>/stat. The command name (field 2) may hold
// spaces and parentheses, so fields are counted from the last ')'.
func readProcStat(pid int) (procStat, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: start time: %w", pid, err)
	}
	st := procStat{state: f[0][0], startTime: start}
	if flags, err := strconv.ParseUint(f[6], 10, 64); err == nil {
		st.exiting = flags&pfExiting != 0
	}
	if len(f) >= 50 {
		code, err := strconv.ParseUint(f[49], 10, 32)
		st.exitCode, st.hasExit = unix.WaitStatus(code), err == nil
	}
	return st, nil
}

// pfExiting is the kernel's PF_EXITING task flag.
const pfExiting = 0x4

// notExiting reports whether pid is still the process that had startTime
// and has not begun to exit: what it showed before (its /proc/<pid>/cgroup)
// was then still its own. An exiting task is moved to the root cgroups
// before it turns zombie, so sameProcess alone would accept a root cgroup
// read in that window.
func notExiting(pid int, startTime uint64) bool {
	if pid <= 0 || startTime == 0 {
		return false
	}
	st, err := readProcStat(pid)
	return err == nil && st.startTime == startTime && !st.exiting && st.state != 'Z' && st.state != 'X'
}

// processStartTime returns field 22 of /proc/<pid>/stat.
func processStartTime(pid int) (uint64, error) {
	st, err := readProcStat(pid)
	return st.startTime, err
}

// sameProcess reports whether pid still names the live (not zombie) process
// that had startTime. A zero pid or start time never matches.
func sameProcess(pid int, startTime uint64) bool {
	if pid <= 0 || startTime == 0 {
		return false
	}
	st, err := readProcStat(pid)
	return err == nil && st.startTime == startTime && st.state != 'Z' && st.state != 'X'
}

// errNoProcess is kill(2)'s ESRCH, whose text "no such process" v0.2 clients
// see when they signal a process that is gone.
var errNoProcess error = syscall.ESRCH

// openVerifiedPidfd opens a pidfd for pid and then checks that pid still has
// startTime. Opening first pins the process: if the check passes, the pidfd
// names the process that was recorded, and a later reuse of the pid cannot
// redirect a signal sent through it.
func openVerifiedPidfd(pid int, startTime uint64) (int, error) {
	if pid <= 0 || startTime == 0 {
		return -1, errNoProcess
	}
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return -1, errNoProcess
		}
		return -1, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	if !sameProcess(pid, startTime) {
		unix.Close(fd)
		return -1, errNoProcess
	}
	return fd, nil
}

// signalVerified sends sig to pid only if it still has startTime.
func signalVerified(pid int, startTime uint64, sig syscall.Signal) error {
	fd, err := openVerifiedPidfd(pid, startTime)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return errNoProcess
		}
		return fmt.Errorf("pidfd_send_signal %d: %w", pid, err)
	}
	return nil
}
