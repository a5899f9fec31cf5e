package main

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/containerd/console"
	"golang.org/x/sys/unix"
)

// tty is the pty side of a terminal process: the unix socket given to runc
// as --console-socket, on which runc sends the pty master (SCM_RIGHTS), and
// then the master itself. A runc before 1.0.0-rc4 has no --console-socket:
// then we make the pty and give runc the slave's path with --console, as
// the 0.2 shim did (newSlaveTTY).
type tty struct {
	dir  string   // temp dir holding the socket; "" with --console
	flag string   // "--console-socket" or "--console"
	path string   // the socket, or the pty slave; given to runc
	ln   *os.File // listening socket, in the poller; nil with --console
	got  chan ttyResult

	mu   sync.Mutex
	con  console.Console  // guarded by mu; nil until received
	size *console.WinSize // guarded by mu: a resize asked before con came
}

type ttyResult struct {
	con console.Console
	err error
}

// newTTY prepares the terminal the way cfg's runtime takes it.
func newTTY(cfg *processConfig) (*tty, error) {
	if !cfg.Features.ConsoleSocket {
		return newSlaveTTY(cfg.RootUID, cfg.RootGID)
	}
	dir, err := os.MkdirTemp("", "pty")
	if err != nil {
		return nil, err
	}
	t := &tty{dir: dir, flag: "--console-socket", path: filepath.Join(dir, "pty.sock"), got: make(chan ttyResult, 1)}
	if t.ln, err = listenUnix(t.path); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	go func() { t.got <- t.accept() }()
	return t, nil
}

// newSlaveTTY opens a new pty and gives its slave to the host ids of
// container root, so the container process can open it; the master is
// ours at once.
func newSlaveTTY(uid, gid int) (*tty, error) {
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, wrap("open /dev/ptmx", err)
	}
	slave, err := unlockSlave(fd, uid, gid)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	master, err := newPtyMaster(fd, slave)
	if err != nil {
		return nil, err
	}
	con, err := console.ConsoleFromFile(master)
	if err != nil {
		master.Close()
		return nil, wrap("pty master", err)
	}
	t := &tty{flag: "--console", path: slave, got: make(chan ttyResult, 1)}
	t.got <- ttyResult{con: con}
	return t, nil
}

// unlockSlave unlocks the slave of the pty master fd, chowns it and
// returns its path.
func unlockSlave(fd, uid, gid int) (string, error) {
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		return "", wrap("unlock pty", err)
	}
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err != nil {
		return "", wrap("pty number", err)
	}
	slave := "/dev/pts/" + strconv.FormatUint(uint64(n), 10)
	if err := os.Chown(slave, uid, gid); err != nil {
		return "", wrap("chown pty slave", err)
	}
	return slave, nil
}

// arg is how runc is given the terminal.
func (t *tty) arg() consoleArg { return consoleArg{flag: t.flag, path: t.path} }

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

// close removes the console socket; a pending accept ends. (With
// --console there is no socket; the master is the console's.)
func (t *tty) close() {
	if t.ln == nil {
		return
	}
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
