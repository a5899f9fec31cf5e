package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/evjournal/containerd/internal/atomicfile"
)

// writeFileAtomic makes dir/name hold data or leave it as it was, even if
// the machine crashes (internal/atomicfile). Files are mode 0600 (see the
// contract).
func writeFileAtomic(dir, name string, data []byte) error {
	return atomicfile.Write(filepath.Join(dir, name), data, 0o600)
}

// writeState writes one of the process's files: atomically, and durably
// unless the process is ephemeral (process.json "ephemeral": an exec nobody
// is told of after a restart, whose files no reboot needs; their fsyncs
// would cost a probe milliseconds on a disk-backed state dir).
func writeState(dir, name string, data []byte, durable bool) error {
	if durable {
		return writeFileAtomic(dir, name, data)
	}
	return atomicfile.WriteUnsynced(filepath.Join(dir, name), data, 0o600)
}

// shellStatus is a wait status in the shell's convention: the exit code,
// or 128+signal for a process killed by a signal.
func shellStatus(ws unix.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// writeExitStatus records the container process's exit: the one fact the
// daemon must be able to read once our exit fifo hangs up.
func writeExitStatus(dir string, ws unix.WaitStatus, durable bool) error {
	return writeState(dir, "exitStatus", []byte(strconv.Itoa(shellStatus(ws))), durable)
}

// writeSelf writes shim.pid and shim.starttime, so that after a daemon
// restart our pid can be told from a reused one; start is our start time
// (prepare read it).
func writeSelf(dir, start string, durable bool) error {
	pid := os.Getpid()
	if err := writeState(dir, "shim.pid", []byte(strconv.Itoa(pid)), durable); err != nil {
		return err
	}
	return writeState(dir, "shim.starttime", []byte(start), durable)
}

// startTime is field 22 of /proc/PID/stat: the process's start time in clock
// ticks since boot. A zombie still has it, so it is readable until reaped.
func startTime(pid int) (string, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	return statField(data, 22)
}

// statField returns field n (1-based, as in proc(5)) of a /proc/PID/stat
// line. Field 2, the command name, may hold spaces and parentheses, so the
// count restarts after its last ')'.
func statField(stat []byte, n int) (string, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || n < 3 {
		return "", errors.New("malformed /proc stat")
	}
	fields := bytes.Fields(stat[i+1:])
	if len(fields) < n-2 {
		return "", errors.New("short /proc stat")
	}
	return string(fields[n-3]), nil
}

// createPrivate creates path with mode 0600 if it does not exist, so that
// runc, which appends to it, does not create it 0644.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

// readPidFile reads the pid runc wrote with --pid-file.
func readPidFile(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(data)))
	if err != nil || pid <= 0 {
		return 0, errors.New("bad pid file " + path + ": " + string(appendJSONString(nil, string(data))))
	}
	return pid, nil
}
