package runtime

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// A live container must never be dropped because some of its state files
// are damaged. Load takes what survives and fills the gaps from the
// processes themselves: a damaged pid file from the shim's children, a
// damaged shim.pid from the container process's parent (the shim is its
// subreaper), a damaged process.json from nothing (the process is
// supervised without its spec and stdio), an exit FIFO that is gone or not
// a FIFO by watching the shim's liveness instead (reconcile). Every gap is
// logged with the container and process.

// salvageIDs reads the pid files one by one: a damaged one is logged and
// taken as absent, then derived from the live processes when it can be.
func salvageIDs(log *logrus.Entry, dir string) processIDs {
	num := func(name string, pid bool) uint64 {
		var n uint64
		var err error
		if pid {
			var p int
			p, err = readPid(filepath.Join(dir, name))
			n = uint64(p)
		} else {
			n, err = readOptionalUint(filepath.Join(dir, name))
		}
		if err != nil {
			log.WithError(err).Warnf("damaged %s: ignored; taken from the live processes if possible", name)
			return 0
		}
		return n
	}
	ids := processIDs{pid: int(num(pidFile, true)), startTime: num(startTimeFile, false),
		shimPid: int(num(shimPidFile, true)), shimStart: num(shimStartTimeFile, false)}
	deriveIDs(log, &ids)
	return ids
}

// deriveIDs fills the ids a damaged file lost from the ones that survive.
func deriveIDs(log *logrus.Entry, ids *processIDs) {
	if ids.pid > 0 && ids.startTime == 0 && ids.shimPid > 0 && isChildOf(ids.pid, ids.shimPid) {
		ids.startTime, _ = processStartTime(ids.pid)
	}
	if ids.shimPid == 0 && ids.pid > 0 && sameProcess(ids.pid, ids.startTime) {
		if ppid, err := parentOf(ids.pid); err == nil && ppid > 1 {
			ids.shimPid = ppid
			ids.shimStart, _ = processStartTime(ppid)
			log.WithField("shim_pid", ppid).Warn("shim found as the parent of the container process")
		}
	}
	if ids.pid == 0 && sameProcess(ids.shimPid, ids.shimStart) {
		if kids := childrenOf(ids.shimPid); len(kids) == 1 {
			ids.pid = kids[0]
			ids.startTime, _ = processStartTime(kids[0])
			log.WithField("process_pid", kids[0]).Warn("container process found as the shim's only child")
		}
	}
}

// parentOf is field 4 of /proc/<pid>/stat.
func parentOf(pid int) (int, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0, fmt.Errorf("/proc/%d/stat: too short", pid)
	}
	return strconv.Atoi(f[1])
}

func isChildOf(pid, parent int) bool {
	ppid, err := parentOf(pid)
	return err == nil && ppid == parent
}

// childrenOf lists the children of pid's main thread (the shim's children
// are forked by whichever thread ran runc; a Go program's are its own).
func childrenOf(pid int) []int {
	var out []int
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	for _, t := range tasks {
		data, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + t.Name() + "/children")
		for _, f := range strings.Fields(string(data)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// openExitFifo opens the exit FIFO's read end; -1 when it is gone or is
// not a FIFO any more (then the shim's liveness stands in for it).
func openExitFifo(log *logrus.Entry, dir string) int {
	path := filepath.Join(dir, exitFifo)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		log.WithError(err).Warn("exit FIFO unusable: the shim's liveness is watched instead")
		return -1
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		unix.Close(fd)
		log.Warn("exit FIFO replaced by something else: the shim's liveness is watched instead")
		return -1
	}
	return fd
}

// readProcessRecord reads process.json; damaged, it is logged and replaced
// by an empty record: the process is supervised without its spec.
func readProcessRecord(log *logrus.Entry, dir, id string) (processRecord, bool, error) {
	var rec processRecord
	err := readJSON(filepath.Join(dir, processFile), &rec)
	switch {
	case err == nil:
		return rec, true, nil
	case errors.Is(err, fs.ErrNotExist):
		return processRecord{Exec: id != initID}, false, nil
	}
	log.WithError(err).Warn("damaged process.json: the process is supervised without its spec and stdio")
	return processRecord{Exec: id != initID}, true, nil
}
