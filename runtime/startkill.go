package runtime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// maxAncestry bounds the walk up the parents of a process (runc exec's
// process is the shim's child or grandchild).
const maxAncestry = 16

// pinStartedExec opens a pidfd on the exec process runc started before the
// start failed (its pid file; e.g. the report timed out after `runc exec -d`
// wrote it), if and only if the pid can be shown to still name that process:
//
//   - by the start time the shim recorded for it, or
//   - when the shim did not get that far, by being a descendant of our shim,
//     which is still unreaped (sp.pidfd), so its pid is not reused either.
//
// A pid that can be tied to neither may name any process by now (the exec
// died and its pid was reused): it is never signalled, and the error says
// why. -1 and no error when runc wrote no pid.
func pinStartedExec(dir string, sp *shimProc) (int, error) {
	pid, _ := readPid(filepath.Join(dir, pidFile))
	if pid == 0 {
		return -1, nil
	}
	if start, _ := readOptionalUint(filepath.Join(dir, startTimeFile)); start != 0 {
		fd, err := openVerifiedPidfd(pid, start)
		if err != nil {
			return -1, fmt.Errorf("pid %d no longer has the recorded start time: %w", pid, err)
		}
		return fd, nil
	}
	if sp == nil || sp.pidfd < 0 {
		return -1, fmt.Errorf("pid %d: no start time recorded and no shim to check it against", pid)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	// The pidfd pins whatever holds pid now; the ancestry read after it is
	// that process's if it still holds the pid at the end (signal 0).
	if !descendantOf(pid, sp.pid) || unix.PidfdSendSignal(fd, 0, nil, 0) != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("pid %d: no start time recorded and not a descendant of the shim (pid %d)", pid, sp.pid)
	}
	return fd, nil
}

// killPinned SIGKILLs the process of a pidfd from pinStartedExec and closes
// it; -1 is a no-op.
func killPinned(fd int) {
	if fd < 0 {
		return
	}
	unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	unix.Close(fd)
}

// descendantOf reports whether ancestor is among the parents of pid.
func descendantOf(pid, ancestor int) bool {
	for i := 0; i < maxAncestry; i++ {
		ppid, err := parentPid(pid)
		if err != nil || ppid <= 1 {
			return false
		}
		if ppid == ancestor {
			return true
		}
		pid = ppid
	}
	return false
}

// parentPid is field 4 of /proc/<pid>/stat.
func parentPid(pid int) (int, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3
	if len(f) < 2 {
		return 0, errors.New("short /proc stat")
	}
	return strconv.Atoi(f[1])
}
