package main

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// spareArg is the shim's only argument when the daemon starts it before it
// has a process for it: a spare (docs/shim-contract.md, "Spares"). The
// daemon keeps a few so that an exec, a probe above all, does not wait for
// a process to start.
const spareArg = "--spare"

// assignFd is where a spare gets its end of the assignment socket (a unix
// SOCK_SEQPACKET socketpair whose other end the daemon holds).
const assignFd = 4

// maxAssignment bounds the assignment message: the container id, the
// bundle path and the runtime, as JSON.
const maxAssignment = 64 << 10

// awaitAssignment waits for the daemon to give this spare its process: ONE
// message holding {"id": ..., "bundle": ..., "runtime": ...} (the three
// arguments a shim is otherwise started with) and, as SCM_RIGHTS, ONE fd:
// the process's directory, which becomes our working directory. It returns
// the command line the shim then runs with. ok is false when the daemon
// closed its end (it stopped, or died) or sent something else: the spare
// then exits, having written nothing anywhere.
func awaitAssignment(prog string) (argv []string, ok bool) {
	defer unix.Close(assignFd)
	unix.CloseOnExec(assignFd)
	if err := unix.SetNonblock(assignFd, true); err != nil {
		return nil, false
	}
	// A dup for os.File (so netpoll parks us: an idle spare costs no CPU),
	// while assignFd itself is closed by the defer.
	dup, err := unix.FcntlInt(assignFd, unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	f := os.NewFile(uintptr(dup), "assign")
	defer f.Close()
	msg, dir, err := recvAssignment(f)
	if err != nil {
		return nil, false
	}
	defer unix.Close(dir)
	a, err := parseAssignment(msg)
	if err != nil {
		return nil, false
	}
	if err := unix.Fchdir(dir); err != nil {
		return nil, false
	}
	return []string{prog, a.id, a.bundle, a.runtime}, true
}

// recvAssignment reads the one message and its directory fd.
func recvAssignment(f *os.File) ([]byte, int, error) {
	buf := make([]byte, maxAssignment)
	oob := make([]byte, unix.CmsgSpace(4))
	var n, oobn int
	err := rawRead(f, func(fd int) (err error) {
		n, oobn, _, _, err = unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		return err
	})
	if err != nil {
		return nil, -1, err
	}
	var fds []int
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for i := range msgs {
			got, _ := unix.ParseUnixRights(&msgs[i])
			fds = append(fds, got...)
		}
	}
	if n == 0 || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, -1, errors.New("no assignment")
	}
	return buf[:n], fds[0], nil
}

// parseAssignment reads the message's three arguments.
func parseAssignment(msg []byte) (args, error) {
	m, err := jsonObject(msg)
	if err != nil {
		return args{}, err
	}
	d := fieldReader{m: m}
	a := args{id: d.string("id"), bundle: d.string("bundle"), runtime: d.string("runtime")}
	if d.err != nil {
		return args{}, d.err
	}
	if a.id == "" || a.bundle == "" {
		return args{}, errors.New("container id and bundle must not be empty")
	}
	return a, nil
}
