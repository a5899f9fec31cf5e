package main

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/evjournal/containerd/internal/oneproc"
	"golang.org/x/sys/unix"
)

// runWait runs argv in the bundle with stdio as its fds 0, 1, 2, through
// the reaper, and waits for it. Pdeathsig: a runc whose shim died must not
// go on alone.
func (s *shim) runWait(argv []string, stdio [3]int) (unix.WaitStatus, error) {
	path, err := lookPath(argv[0])
	if err != nil {
		return 0, wrap("runtime "+string(appendJSONString(nil, argv[0])), err)
	}
	attr := &syscall.ProcAttr{
		Dir:   s.bundle,
		Env:   runtimeEnv(),
		Files: []uintptr{uintptr(stdio[0]), uintptr(stdio[1]), uintptr(stdio[2])},
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	}
	_, done, err := s.reaper.start(path, argv, attr)
	if err != nil {
		return 0, wrap("start "+path, err)
	}
	return <-done, nil
}

// runtimeEnv is the shim's environment with GOMAXPROCS=1, whatever the
// shim's own: runc is a short Go command whose work is one sequence of
// steps, and `runc init` sets one P for itself anyway (runc passes the
// variable on to it; the container's process gets the environment its
// spec gives, not runc's). With one P, runc starts fewer threads and hands
// no work between CPUs: bare `runc exec` of a container's /bin/true took
// 0.4-1.1 ms less here (9.3-9.9 against 10.4-10.7 ms), `runc create` and
// `start` 0.6-2.8 ms less (bench/README.md).
func runtimeEnv() []string { return oneproc.Env(os.Environ()) }

// runQuiet runs argv with /dev/null as stdio and fails unless it exits 0.
func (s *shim) runQuiet(argv []string) error {
	null, err := unix.Open(os.DevNull, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(null)
	ws, err := s.runWait(argv, [3]int{null, null, null})
	if err == nil && ws != 0 {
		err = errors.New(strings.Join(argv, " ") + ": exit status " + strconv.Itoa(shellStatus(ws)))
	}
	return err
}

var errNotFound = errors.New("executable file not found in $PATH")

// lookPath finds a runtime given by name in $PATH; a name with a slash is
// used as it is.
func lookPath(name string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range strings.Split(os.Getenv("PATH"), ":") {
		if dir == "" {
			dir = "."
		}
		path := dir + "/" + name
		if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return path, nil
		}
	}
	return "", errNotFound
}
