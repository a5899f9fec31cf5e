package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// fill writes n bytes to fd: the output a hostile exec floods a reply with.
func fill(args []string) error {
	if len(args) != 2 {
		return errors.New("want N FD")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil {
		return err
	}
	f := os.Stdout
	if args[1] == "2" {
		f = os.Stderr
	}
	chunk := bytes.Repeat([]byte{'x'}, 64<<10)
	for n > 0 {
		k := min(n, len(chunk))
		if _, err := f.Write(chunk[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// await returns once path exists, woken by inotify on its directory.
func await(path string) error {
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	if _, err := syscall.InotifyAddWatch(fd, filepath.Dir(path), syscall.IN_CREATE|syscall.IN_MOVED_TO); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	for {
		if _, err := os.Lstat(path); err == nil {
			return nil
		}
		if _, err := syscall.Read(fd, buf); err != nil && err != syscall.EINTR {
			return err
		}
	}
}

// trySocket opens and closes a socket of the family the name says:
// AF_ALG (38), AF_VSOCK (40) or AF_INET.
func trySocket(name string) syscall.Errno {
	family, typ := syscall.AF_INET, syscall.SOCK_STREAM
	switch name {
	case "socket-alg":
		family, typ = 38, syscall.SOCK_SEQPACKET
	case "socket-vsock":
		family = 40
	}
	fd, _, errno := syscall.RawSyscall(syscall.SYS_SOCKET, uintptr(family), uintptr(typ), 0)
	if errno == 0 {
		syscall.Close(int(fd))
	}
	return errno
}
