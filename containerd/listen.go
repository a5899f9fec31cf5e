package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// socketMode: owner and group may connect, nobody else (docs/api.md 1.1).
const socketMode = 0o660

// listen opens the API listeners for --listen (docs/api.md 1.1). fd:// may
// yield several (systemd socket activation).
func listen(l listenAddr, gid int, log *logrus.Entry) ([]net.Listener, error) {
	switch l.proto {
	case "unix":
		lis, err := listenUnix(l.addr, gid)
		if err != nil {
			return nil, err
		}
		return []net.Listener{lis}, nil
	case "tcp":
		lis, err := net.Listen("tcp", l.addr)
		if err != nil {
			return nil, err
		}
		log.WithField("address", lis.Addr().String()).Warn("the API is served on TCP without authentication")
		return []net.Listener{lis}, nil
	case "fd":
		return activationListeners(l.addr)
	}
	return nil, fmt.Errorf("--listen %s: unknown protocol", l)
}

// listenUnix creates the socket so that it is never reachable by others: it
// is created under umask 0777 (mode 0000), then given its group and mode
// 0660. A stale socket file is removed first; a live one (another daemon
// answers) or a file that is not a socket is an error.
func listenUnix(path string, gid int) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), stateDirMode); err != nil {
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	old := unix.Umask(0o777)
	lis, err := net.Listen("unix", path)
	unix.Umask(old)
	if err != nil {
		return nil, err
	}
	if err := setSocketAccess(path, gid); err != nil {
		lis.Close()
		return nil, err
	}
	return lis, nil
}

func setSocketAccess(path string, gid int) error {
	if gid >= 0 {
		if err := os.Lchown(path, -1, gid); err != nil {
			return fmt.Errorf("socket group: %w", err)
		}
	}
	if err := os.Chmod(path, socketMode); err != nil {
		return fmt.Errorf("socket mode: %w", err)
	}
	return nil
}

func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s exists and is not a socket: not removing it", path)
	}
	if c, err := net.DialTimeout("unix", path, 200*time.Millisecond); err == nil {
		c.Close()
		return fmt.Errorf("%s is in use by another process", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale socket: %w", err)
	}
	return nil
}

// activationListeners takes the sockets systemd passed (through
// go-systemd's activation, which unsets LISTEN_PID, LISTEN_FDS and
// LISTEN_FDNAMES so children do not see them, and makes the fds
// close-on-exec): all of them for fd:// and fd://*, or just fd N for fd://N.
func activationListeners(spec string) ([]net.Listener, error) {
	pid, fds := os.Getenv("LISTEN_PID"), os.Getenv("LISTEN_FDS")
	files := activation.Files(true)
	if len(files) == 0 {
		return nil, noSocketsPassed(pid, fds)
	}
	want := -1
	if spec != "" && spec != "*" {
		want, _ = strconv.Atoi(spec) // checked by parseListen
		if last := int(files[len(files)-1].Fd()); want > last {
			closeFiles(files)
			return nil, fmt.Errorf("fd://%d: only fds %d to %d were passed", want, files[0].Fd(), last)
		}
	}
	var out []net.Listener
	for _, f := range files {
		fd := int(f.Fd())
		if want >= 0 && fd != want {
			f.Close()
			continue
		}
		lis, err := net.FileListener(f)
		f.Close()
		if err != nil {
			closeAll(out)
			return nil, fmt.Errorf("fd %d: %w", fd, err)
		}
		out = append(out, lis)
	}
	return out, nil
}

// noSocketsPassed says why no socket came from systemd: activation.Files
// only returns none.
func noSocketsPassed(pid, fds string) error {
	switch {
	case pid == "" || fds == "":
		return fmt.Errorf("fd://: no sockets were passed (LISTEN_PID/LISTEN_FDS not set: start through systemd socket activation)")
	case pid != strconv.Itoa(os.Getpid()):
		return fmt.Errorf("fd://: LISTEN_PID=%s is not this process (%d)", pid, os.Getpid())
	}
	return fmt.Errorf("fd://: LISTEN_FDS=%q: no sockets were passed", fds)
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

func closeAll(ls []net.Listener) {
	for _, l := range ls {
		l.Close()
	}
}
