package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Spares are shims started before there is a process for them
// (docs/shim-contract.md, "Spares"): `<shim> --spare`, in "/", with the
// start pipe as fd 3 and one end of an assignment socket as fd 4. The
// daemon keeps sparesWanted of them per shim binary, so that a process's
// start (an exec probe above all) costs no fork and exec of the shim: the
// shim's start, the Go runtime's included, is done before the request. A
// taken spare is replaced once the start that took it has reported
// (sparePool.refill). Taking one is sending it one message: its three arguments and the
// process dir's fd, which becomes its working directory. From then on it
// is the shim a `<shim> <id> <bundle> <runtime>` started in that dir would
// be: its files, its exit FIFO, its restore after a daemon restart, the
// exactly-once rules, all as before. A spare that is never taken leaves
// nothing: it writes no file, and exits when the daemon closes its end of
// the socket, or dies.

// sparesWanted is how many idle spares the daemon keeps per shim binary.
// Two: one probe after another finds one; a burst of probes takes them and
// the rest start their shims as they come, while the pool refills.
const sparesWanted = 2

// spare is an idle shim, the daemon's child.
type spare struct {
	sp     *shimProc
	report *os.File // read end of its start pipe
	assign *os.File // our end of its assignment socket (non-blocking: netpoll)
}

// watch waits, parked in the netpoller, for the idle spare's death: a
// spare sends nothing on its assignment socket, so the socket turns
// readable only at its end (killed by hand, or by the OOM killer: end of
// file), and it is dropped from the pool and reaped at once rather than
// left a zombie until the next take. It only peeks, and returns as well
// when the socket is closed (the spare was taken, or dropped): a take never
// waits for the watch.
func (p *sparePool) watch(s *spare) {
	if rc, err := s.assign.SyscallConn(); err == nil {
		var b [1]byte
		rc.Read(func(fd uintptr) bool {
			_, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
			return err != unix.EAGAIN
		})
	}
	if p.remove(s) {
		s.discard()
	}
}

// remove drops s from the idle spares; false if it is not there (taken).
func (p *sparePool) remove(s *spare) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, x := range p.idle {
		if x == s {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			return true
		}
	}
	return false
}

// discard ends a spare that was never taken: it exits when its socket
// closes; the late reaper reaps it.
func (s *spare) discard() {
	s.assign.Close()
	s.report.Close()
	lateReaper.add(s.sp.pidfd)
}

// send gives the spare its assignment and closes our end of its socket.
func (s *spare) send(msg, oob []byte) error {
	defer s.assign.Close()
	rc, err := s.assign.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Write(func(fd uintptr) bool {
		serr = unix.Sendmsg(int(fd), msg, oob, nil, unix.MSG_NOSIGNAL)
		return serr != unix.EAGAIN
	}); err != nil {
		return err
	}
	return serr
}

// sparePool holds the idle spares of one shim binary.
type sparePool struct {
	path    string
	mu      sync.Mutex
	idle    []*spare // guarded by mu
	filling int      // guarded by mu: spares being started for idle
}

var spares = struct {
	mu    sync.Mutex
	pools map[string]*sparePool // by the shim binary's path
}{pools: map[string]*sparePool{}}

func sparePoolFor(path string) *sparePool {
	spares.mu.Lock()
	defer spares.mu.Unlock()
	p := spares.pools[path]
	if p == nil {
		p = &sparePool{path: path}
		spares.pools[path] = p
	}
	return p
}

// take returns an idle spare, nil if none.
func (p *sparePool) take() *spare {
	p.mu.Lock()
	var s *spare
	if n := len(p.idle); n > 0 {
		s = p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
	}
	p.mu.Unlock()
	return s
}

// refill starts the spares the pool lacks. The daemon calls it once the
// start of the process that took a spare is over (its report read): a
// spare's start (a fork, an exec, the Go runtime's start) then does not
// compete for the CPU with the `runc exec` it would only delay.
func (p *sparePool) refill() {
	p.mu.Lock()
	need := sparesWanted - len(p.idle) - p.filling
	p.filling += max(need, 0)
	p.mu.Unlock()
	for range need {
		go p.fill()
	}
}

// fill starts one spare for the pool. A failure is not reported here:
// the next take starts its shim itself and reports it then.
func (p *sparePool) fill() {
	s, err := startSpare(p.path)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.filling--
	if err == nil {
		p.idle = append(p.idle, s)
		go p.watch(s)
	}
}

// DropSpares ends every idle spare (the daemon's stop). Spares would end
// by themselves when the daemon exits; this ends them at once.
func DropSpares() {
	spares.mu.Lock()
	pools := make([]*sparePool, 0, len(spares.pools))
	for _, p := range spares.pools {
		pools = append(pools, p)
	}
	spares.mu.Unlock()
	for _, p := range pools {
		p.mu.Lock()
		idle := p.idle
		p.idle = nil
		p.mu.Unlock()
		for _, s := range idle {
			s.discard()
		}
	}
}

// startSpare starts `<path> --spare` in "/", its stdio on /dev/null, fd 3
// the start pipe's write end and fd 4 its end of the assignment socket.
func startSpare(path string) (*spare, error) {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer null.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer w.Close()
	// Non-blocking: our end is polled by the netpoller (watch, send); the
	// spare's is made blocking by StartProcess (and the spare sets it as
	// it needs).
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("shim assignment socket: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(pair[0]), "assign"), os.NewFile(uintptr(pair[1]), "assign")
	defer theirs.Close()
	sp, err := startProcess(path, []string{"--spare"}, "/", []*os.File{null, null, null, w, theirs})
	if err != nil {
		r.Close()
		ours.Close()
		return nil, err
	}
	return &spare{sp: sp, report: r, assign: ours}, nil
}

// shimArgs are what a shim is started with besides its process dir.
type shimArgs struct {
	ID      string `json:"id"`
	Bundle  string `json:"bundle"`
	Runtime string `json:"runtime"`
}

// assignShim gives the process in dir a shim: an idle spare of the shim
// binary when there is one, else one started now. It returns the shim, the
// read end of its start pipe (whose line readStartReport reads) and the
// pool to refill once the report is read.
func assignShim(shim string, a shimArgs, dir string) (*shimProc, *os.File, *sparePool, error) {
	path, err := lookShim(shim)
	if err != nil {
		return nil, nil, nil, err
	}
	msg, err := json.Marshal(a)
	if err != nil {
		return nil, nil, nil, err
	}
	dirfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(dirfd)
	pool := sparePoolFor(path)
	// An idle spare may have died (killed by hand, or by the OOM killer):
	// its socket then refuses the message, and the next one is tried; the
	// last resort is a spare started for this process alone.
	for {
		s, fresh := pool.take(), false
		if s == nil {
			if s, err = startSpare(path); err != nil {
				return nil, nil, nil, err
			}
			fresh = true
		}
		err := s.send(msg, unix.UnixRights(dirfd))
		if err == nil || (fresh && (errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET))) {
			// A shim started for this process that is gone already says
			// why on its start pipe, or nothing: readStartReport gives
			// its report, or ErrShimExited, as for any shim.
			return s.sp, s.report, pool, nil
		}
		s.report.Close()
		s.sp.kill()
		if fresh {
			return nil, nil, nil, fmt.Errorf("assign shim %s: %w", path, err)
		}
	}
}
