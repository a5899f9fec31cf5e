package main

import (
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/evjournal/containerd/cri/crilog"
	"golang.org/x/sys/unix"
)

// stdio joins the container process's stdio to the client's paths ("" is
// /dev/null). Without a terminal the process gets OS pipes (as runc's own
// fds 0, 1, 2, which runc passes on) and copies run FIFO → pipe → FIFO;
// with one, the pty master that runc sends to our console socket. With a
// log path, stdout and stderr go into that CRI log instead (logsink.go).
//
// Fds are opened close-on-exec and non-blocking on our side, so every copy
// parks in the Go poller instead of holding a thread. On a setup error the
// shim exits, which closes whatever was opened.
type stdio struct {
	child      [3]int   // runc's fds 0, 1, 2; closed once runc ran
	stdinR     *os.File // read end of the client's stdin FIFO; nil without stdin
	runcStderr tail     // runc's stderr during the start (error fallback)
	stderrCopy *copier  // the copy that records runcStderr; nil if none
	outputs    []*copier
	last       atomic.Int64        // last byte moved by an output copy (unix ns)
	tty        *tty                // nil without a terminal
	opened     map[string]*os.File // output paths opened so far, by path
	crilog     *crilog.File        // the CRI log; nil without a log path
	log        *logger

	mu sync.Mutex
	// keepAlive is a write handle on the stdin FIFO, so the process sees
	// EOF only after close-stdin AND the client's close. Guarded by mu.
	keepAlive *os.File
}

func newStdio(cfg *processConfig, log *logger) (*stdio, error) {
	s := &stdio{log: log}
	s.last.Store(time.Now().UnixNano())
	if err := s.openStdin(cfg.Stdin); err != nil {
		return nil, err
	}
	if cfg.LogPath != "" {
		if err := s.openCRILog(cfg.LogPath); err != nil {
			return nil, err
		}
	}
	null, err := unix.Open(os.DevNull, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	s.child = [3]int{null, null, null}
	if cfg.Terminal {
		err = s.openTerminal(cfg)
	} else {
		err = s.openPipes(cfg)
	}
	return s, err // with an error, s is returned for close
}

// openStdin opens the client's stdin read-only (see openInput). For a FIFO
// it also takes a keep-alive write handle on that same FIFO (it writes
// nothing), so the process sees EOF only after close-stdin AND the
// client's close; the read end being open, that open does not block.
func (s *stdio) openStdin(path string) error {
	if path == "" {
		return nil
	}
	r, err := openInput(path)
	if err != nil {
		return err
	}
	s.stdinR = r
	if fileType(int(r.Fd())) != unix.S_IFIFO {
		return nil
	}
	keep, err := reopen(int(r.Fd()), path, unix.O_WRONLY|unix.O_NONBLOCK)
	if err != nil {
		return wrap("open stdin", err)
	}
	s.keepAlive = keep
	return nil
}

// output opens an output path once: stdout and stderr naming the same path
// (a file this shim creates) share one open file.
func (s *stdio) output(path string) (*os.File, error) {
	if f, ok := s.opened[path]; ok {
		fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return nil, wrap("dup output", err)
		}
		return os.NewFile(uintptr(fd), path), nil
	}
	f, err := openOutput(path)
	if err != nil {
		return nil, err
	}
	if s.opened == nil {
		s.opened = map[string]*os.File{}
	}
	s.opened[path] = f
	return f, nil
}

// openPipes gives the process a pipe for each stdio path that is set and
// starts copying: stdin FIFO → pipe, pipes → output paths.
func (s *stdio) openPipes(cfg *processConfig) error {
	if s.stdinR != nil {
		child, w, err := newPipe(false, cfg)
		if err != nil {
			return err
		}
		s.child[0] = child
		(&copier{src: s.stdinR, dst: w, end: func() { w.Close(); s.stdinR.Close() }}).start()
	}
	// Direct output needs the runtime's own log for a failed start's
	// message: runc's stderr is then the FIFO, which only the daemon reads.
	direct := cfg.DirectOutput && cfg.Features.Log
	for i, path := range []string{cfg.Stdout, cfg.Stderr} {
		var err error
		switch {
		case s.crilog != nil:
			err = s.pipeLog(i+1, cfg)
		case path != "" && direct:
			err = s.directOut(i+1, path, cfg)
		case path != "":
			err = s.pipeOut(i+1, path, cfg)
		}
		if err != nil {
			return err
		}
	}
	if s.stderrCopy == nil && !(direct && cfg.Stderr != "") {
		return s.recordRuncStderr(cfg)
	}
	return nil
}

// directOut gives the process (fd 1 or 2) the FIFO at path itself, opened
// write-only: an ephemeral exec's output goes straight to the daemon, with
// no pipe, copy or drain of ours on its way, and its reader sees end of
// file when the process and whatever it left holding it are gone. The
// daemon holds the read end open before it asks for the exec (without a
// reader the open fails, ENXIO), and reads and bounds all of it, so the
// process never blocks on a FIFO nobody drains.
func (s *stdio) directOut(fd int, path string, cfg *processConfig) error {
	pfd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return wrap("open output "+path, err)
	}
	defer unix.Close(pfd)
	if fileType(pfd) != unix.S_IFIFO {
		return wrap("output "+path, errors.New("direct output must be a FIFO"))
	}
	// The very FIFO the O_PATH fd names, write-only and non-blocking so
	// that a missing reader fails at once (ENXIO) instead of hanging us.
	child, err := reopenFD(pfd, path, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return err
	}
	// Blocking for the process, as a pipe of ours would be.
	if err := unix.SetNonblock(child, false); err != nil {
		unix.Close(child)
		return err
	}
	if cfg.RootUID != 0 || cfg.RootGID != 0 {
		if err := unix.Fchown(child, cfg.RootUID, cfg.RootGID); err != nil {
			unix.Close(child)
			return wrap("chown output FIFO", err)
		}
	}
	s.child[fd] = child
	return nil
}

// recordRuncStderr gives runc (and so the process) a stderr pipe read into
// runcStderr and otherwise discarded: without a client stderr path, runc's
// own message on a failed start is still captured and returned.
func (s *stdio) recordRuncStderr(cfg *processConfig) error {
	child, r, err := newPipe(true, cfg)
	if err != nil {
		return err
	}
	s.child[2] = child
	s.stderrCopy = (&copier{src: r, tee: &s.runcStderr, keep: true, end: func() { r.Close() }}).start()
	return nil
}

// pipeOut makes the pipe for fd (1 or 2) and copies it to path. runc's own
// stderr is the process's, so the stderr copy also records runc's message.
func (s *stdio) pipeOut(fd int, path string, cfg *processConfig) error {
	dst, err := s.output(path)
	if err != nil {
		return err
	}
	child, r, err := newPipe(true, cfg)
	if err != nil {
		return err
	}
	s.child[fd] = child
	c := &copier{src: r, dst: dst, keep: true, last: &s.last}
	if fd == 2 {
		c.tee = &s.runcStderr
		s.stderrCopy = c
	}
	s.outputs = append(s.outputs, c.start())
	return nil
}

// newPipe makes a pipe and returns the end runc gets (blocking, as the
// process expects) and our end (non-blocking, in the poller). read says
// which end is ours. The pipe is given to the host ids of container root.
func newPipe(read bool, cfg *processConfig) (int, *os.File, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return -1, nil, err
	}
	child, ours := p[0], p[1]
	if read {
		child, ours = p[1], p[0]
	}
	if cfg.RootUID != 0 || cfg.RootGID != 0 {
		if err := unix.Fchown(child, cfg.RootUID, cfg.RootGID); err != nil {
			return -1, nil, wrap("chown stdio pipe", err)
		}
	}
	if err := unix.SetNonblock(ours, true); err != nil {
		return -1, nil, err
	}
	return child, os.NewFile(uintptr(ours), "pipe"), nil
}

// openTerminal prepares the console socket (or the pty, for an old runc);
// runc's stderr (the process's stdio is the pty) goes to a pipe read into
// runcStderr.
func (s *stdio) openTerminal(cfg *processConfig) error {
	t, err := newTTY(cfg)
	if err != nil {
		return err
	}
	s.tty = t
	return s.recordRuncStderr(&processConfig{})
}

// failedRuncStderr is what a failed runc wrote to its stderr: it waits
// (bounded) for the copy to reach EOF, which comes once runc and the
// process it could not start are gone.
func (s *stdio) failedRuncStderr(timeout time.Duration) string {
	if s.stderrCopy == nil {
		return ""
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-s.stderrCopy.done:
	case <-t.C:
	}
	return s.runcStderr.String()
}

// close releases what a failed start leaves: the console socket.
func (s *stdio) close() {
	if s.tty != nil {
		s.tty.close()
	}
}

// closeChild closes our copies of runc's fds once runc has run, so that the
// copies see EOF when the process (and runc) are gone.
func (s *stdio) closeChild() {
	closed := map[int]bool{}
	for _, fd := range s.child {
		if !closed[fd] {
			unix.Close(fd)
			closed[fd] = true
		}
	}
}

// attachTerminal receives the pty master from runc and starts copying
// stdin FIFO → master → stdout path (or the CRI log's stdout stream).
func (s *stdio) attachTerminal(cfg *processConfig, timeout time.Duration) error {
	con, err := s.tty.receive(timeout)
	if err != nil {
		return err
	}
	if s.stdinR != nil {
		(&copier{src: s.stdinR, dst: con, end: func() { s.stdinR.Close() }}).start()
	}
	if s.crilog != nil {
		s.outputs = append(s.outputs, s.logCopier(con, crilog.Stdout).start())
		return nil
	}
	var dst io.Writer
	if cfg.Stdout != "" {
		f, err := s.output(cfg.Stdout)
		if err != nil {
			return err
		}
		dst = f
	}
	c := &copier{src: con, dst: dst, keep: true, last: &s.last}
	s.outputs = append(s.outputs, c.start())
	return nil
}

// closeStdin drops the keep-alive handle: once the client has closed its
// end too and its data is copied, the process reads EOF.
func (s *stdio) closeStdin() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keepAlive != nil {
		s.keepAlive.Close()
		s.keepAlive = nil
	}
}

// resize sets the pty's size; without a terminal it does nothing.
func (s *stdio) resize(width, height uint16) {
	if s.tty != nil {
		s.tty.resize(width, height)
	}
}

// drain waits for the output copies to end, bounded (see drain). The CRI
// log's copies it gave up on are then stopped, so that their unfinished
// last lines are written.
func (s *stdio) drain(idle, limit time.Duration) drainResult {
	r := drain(s.outputs, &s.last, idle, limit)
	if r != drained {
		stopCopies(s.outputs, flushStopTimeout)
	}
	return r
}
