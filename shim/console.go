package main

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/containerd/console"
	"golang.org/x/sys/unix"
)

// tty is the pty side of a terminal process: the unix socket given to runc
// as --console-socket, on which runc sends the pty master (SCM_RIGHTS), and
// then the master itself.
type tty struct {
	dir  string   // temp dir holding the socket
	path string   // the socket, given to runc
	ln   *os.File // listening socket, in the poller
	got  chan ttyResult

	mu   sync.Mutex
	con  console.Console  // guarded by mu; nil until received
	size *console.WinSize // guarded by mu: a resize asked before con came
}

type ttyResult struct {
	con console.Console
	err error
}

func newTTY() (*tty, error) {
	dir, err := os.MkdirTemp("", "pty")
	if err != nil {
		return nil, err
	}
	t := &tty{dir: dir, path: filepath.Join(dir, "pty.sock"), got: make(chan ttyResult, 1)}
	if t.ln, err = listenUnix(t.path); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	go func() { t.got <- t.accept() }()
	return t, nil
}

// listenUnix listens on a unix stream socket at path, non-blocking so that
// accept parks in the poller and close ends it.
func listenUnix(path string) (*os.File, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), path)
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		f.Close()
		return nil, wrap("console socket", err)
	}
	if err := unix.Listen(fd, 1); err != nil {
		f.Close()
		return nil, wrap("console socket", err)
	}
	return f, nil
}

// accept takes runc's connection and the pty master it sends.
func (t *tty) accept() ttyResult {
	var conn int
	err := rawRead(t.ln, func(fd int) (err error) {
		conn, _, err = unix.Accept4(fd, unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK)
		return err
	})
	if err != nil {
		return ttyResult{err: wrap("console socket: accept", err)}
	}
	c := os.NewFile(uintptr(conn), "console-conn")
	defer c.Close()
	master, err := recvFd(c)
	if err != nil {
		return ttyResult{err: wrap("console socket", err)}
	}
	con, err := console.ConsoleFromFile(master)
	if err != nil {
		master.Close()
		return ttyResult{err: wrap("pty master", err)}
	}
	return ttyResult{con: con}
}

// recvFd reads one message carrying one fd (SCM_RIGHTS); runc puts the pty's
// name in the data.
func recvFd(c *os.File) (*ptyMaster, error) {
	name := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	var n, oobn int
	err := rawRead(c, func(fd int) (err error) {
		n, oobn, _, _, err = unix.Recvmsg(fd, name, oob, unix.MSG_CMSG_CLOEXEC)
		return err
	})
	if err != nil {
		return nil, err
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, errors.New("runc sent no pty master")
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return nil, errors.New("runc sent no pty master")
	}
	return newPtyMaster(fds[0], string(name[:n]))
}

// rawRead runs op on f's fd each time f is readable, until op stops
// failing with EAGAIN.
func rawRead(f *os.File, op func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var opErr error
	err = rc.Read(func(fd uintptr) bool {
		opErr = op(int(fd))
		return opErr != unix.EAGAIN
	})
	if err != nil {
		return err
	}
	return opErr
}

// ptyMaster is the pty master as console.File. Fd returns the raw fd without
// touching the *os.File: os.File.Fd would switch it to blocking mode and take
// the reads out of the poller.
type ptyMaster struct {
	*os.File
	fd int
}

func newPtyMaster(fd int, name string) (*ptyMaster, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &ptyMaster{File: os.NewFile(uintptr(fd), name), fd: fd}, nil
}

func (m *ptyMaster) Fd() uintptr { return uintptr(m.fd) }

// receive waits (bounded) for the master. runc sends it before it returns,
// so after a successful runc it is there at once.
func (t *tty) receive(timeout time.Duration) (console.Console, error) {
	defer t.close()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case r := <-t.got:
		if r.err != nil {
			return nil, r.err
		}
		t.setConsole(r.con)
		return r.con, nil
	case <-timer.C:
		return nil, errors.New("runc did not send the pty master on the console socket")
	}
}

func (t *tty) setConsole(con console.Console) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.con = con
	if t.size != nil {
		con.Resize(*t.size)
	}
}

// close removes the console socket; a pending accept ends.
func (t *tty) close() {
	t.ln.Close()
	os.RemoveAll(t.dir)
}

// resize sets the pty's window size, or remembers it until the pty comes.
func (t *tty) resize(width, height uint16) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ws := console.WinSize{Width: width, Height: height}
	if t.con == nil {
		t.size = &ws
		return
	}
	t.con.Resize(ws)
}
