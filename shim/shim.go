package main

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/evjournal/containerd/internal/memtrim"
)

// Bounds of the shim's waits.
const (
	// consoleTimeout bounds the wait for the pty master once runc returned
	// (runc sends it before it returns, so this is only a safety net).
	consoleTimeout = 10 * time.Second
	// stderrTimeout bounds the wait for a failed runc's stderr.
	stderrTimeout = 2 * time.Second
	// drainIdle is how long, after the process exited, the output copies
	// may wait for input that does not come (a child the process left holds
	// the pipe) before the shim stops waiting for them.
	drainIdle = 2 * time.Second
	// drainMax bounds the whole drain: output a client has not taken within
	// it of the exit is dropped (with a warning), never waited on. The
	// daemon has the exit already (notifyExit), so this only bounds how
	// long a client that is late reading still gets the process's last
	// output.
	drainMax = 5 * time.Second
)

// shim is one run of containerd-shim: one container process, its stdio and
// its exit.
type shim struct {
	args
	dir    string // the process's state dir, our working directory
	cfg    *processConfig
	log    *logger
	reaper *reaper
	io     *stdio
	// mountNS holds the init's mount namespace until its exit is notified
	// (holdMountNS); -1 for an exec or when not held.
	mountNS int
}

// run starts the process, reports on the start pipe, then waits for the
// process's exit and records it.
func (s *shim) run(sp *startPipe) int {
	pid, exited, err := s.start()
	if err != nil {
		s.log.error("start " + s.kind() + ": " + err.Error())
		sp.fail(err)
		return 1
	}
	sp.started(pid)
	s.io.runcStderr.stop()
	return s.wait(trimWhenRunning(exited))
}

// trimDelay is how long the process must run before the shim gives back
// what its start used (trimWhenRunning).
const trimDelay = time.Second

// trimWhenRunning returns the start's garbage (a forced collection) and the
// pages of text only the start ran (memtrim), so that an idle shim keeps
// what it runs, once the process has run for trimDelay. A process that
// ends sooner (a probe's exec, mostly) is not trimmed for: the shim exits
// soon anyway, and with its one P busy collecting, the reap and the exit
// notification would wait behind the collection. The returned channel
// gives the exit status.
func trimWhenRunning(exited <-chan unix.WaitStatus) <-chan unix.WaitStatus {
	t := time.NewTimer(trimDelay)
	defer t.Stop()
	select {
	case ws := <-exited:
		done := make(chan unix.WaitStatus, 1)
		done <- ws
		return done
	case <-t.C:
	}
	debug.FreeOSMemory()
	memtrim.ReleaseText()
	return exited
}

// wait records the process's exit: exitStatus (durable), then at once the
// exit notification (the status on the exit fifo, which is then closed: the
// daemon learns of the exit at the reap), then a bounded drain of the
// outputs, then the shim exits.
func (s *shim) wait(exited <-chan unix.WaitStatus) int {
	ws := <-exited
	reaped := time.Now()
	code := 0
	// Relative to our working directory, not s.dir: when init exits first
	// the daemon renames the container's dir (retires it) while exec shims
	// still run; the cwd follows the rename, the absolute path does not.
	if err := writeExitStatus(".", ws, !s.cfg.Ephemeral); err != nil {
		s.log.error("write exitStatus " + strconv.Itoa(shellStatus(ws)) + ": " + err.Error() +
			" (the status still reaches the daemon on the exit fifo)")
		code = 1
	}
	if err := notifyExit(shellStatus(ws), reaped); err != nil {
		s.log.warn("exit fifo: " + err.Error() + " (the daemon reads exitStatus instead)")
	}
	releaseMountNS(&s.mountNS)
	switch s.io.drain(drainIdle, drainMax) {
	case drainIdleGaveUp:
		s.log.warn("output still held open " + drainIdle.String() + " after the process exited (by a child it left?); stopped copying")
	case drainTimedOut:
		s.log.warn("output not taken by its client within " + drainMax.String() + " of the exit; the rest is dropped")
	}
	return code
}

func (s *shim) kind() string {
	switch {
	case s.cfg.Exec:
		return "exec"
	case s.cfg.Checkpoint != "":
		return "restore"
	}
	return "create"
}

// start runs runc and, once it succeeded, adopts the process it started.
func (s *shim) start() (int, <-chan unix.WaitStatus, error) {
	io, err := newStdio(s.cfg, s.log)
	if err != nil {
		if io != nil {
			io.close()
		}
		return 0, nil, err
	}
	s.io = io
	ctl, err := openControl("control")
	if err != nil {
		io.close()
		return 0, nil, err
	}
	go serveControl(ctl, io, s.log)
	if err := s.runRunc(); err != nil {
		io.close()
		return 0, nil, err
	}
	pid, exited, err := s.adopt()
	if err == nil && s.cfg.Start {
		if err = s.startInit(pid); err != nil {
			err = s.undo(pid, err)
		}
	}
	return pid, exited, err
}

// runRunc runs the runc command that creates (or execs, or restores) the
// process, with the process's stdio as runc's own.
func (s *shim) runRunc() error {
	if s.cfg.Exec {
		if err := writeState(s.dir, runcProcessFile, s.cfg.Process, !s.cfg.Ephemeral); err != nil {
			return err
		}
	}
	var console consoleArg
	if s.io.tty != nil {
		console = s.io.tty.arg()
	}
	argv := runcArgv(s.cfg, s.args, s.dir, console, time.Now())
	logPath := filepath.Join(s.dir, "log.json")
	if err := createPrivate(logPath); err != nil {
		return err
	}
	from := fileSize(logPath)
	ws, err := s.runWait(argv, s.io.child)
	s.io.closeChild()
	if err != nil {
		return err
	}
	os.Chmod(filepath.Join(s.dir, "pid"), 0o600) // runc makes it 0644
	if ws != 0 {
		return newRuncError(s.kind(), ws, logPath, from, func() string { return s.io.failedRuncStderr(stderrTimeout) })
	}
	return nil
}

// adopt takes charge of the process runc started: its pid, its start time
// (read while the reaper still leaves it alone, so it is there even if the
// process already exited), then its terminal.
func (s *shim) adopt() (int, <-chan unix.WaitStatus, error) {
	pid, err := readPidFile(filepath.Join(s.dir, "pid"))
	if err != nil {
		s.reaper.reapAll()
		return 0, nil, s.undo(0, err)
	}
	var start string
	exited := s.reaper.claim(pid, func() { // pid cannot be reaped meanwhile
		start, err = startTime(pid)
		if !s.cfg.Exec {
			s.mountNS = holdMountNS(pid)
		}
		s.reaper.watchExit(pid)
	})
	s.reaper.reapAll()
	if err == nil {
		err = writeState(s.dir, "starttime", []byte(start), !s.cfg.Ephemeral)
	}
	if err == nil && s.io.tty != nil {
		err = s.io.attachTerminal(s.cfg, consoleTimeout)
	}
	if err != nil {
		return 0, nil, s.undo(pid, err)
	}
	return pid, exited, nil
}

// undo removes what runc started when the shim cannot take charge of it,
// so a failed start leaves nothing running; it returns err.
func (s *shim) undo(pid int, err error) error {
	releaseMountNS(&s.mountNS)
	if pid > 0 {
		s.reaper.signal(pid, unix.SIGKILL) // not once reaped: the pid may be reused
	}
	if !s.cfg.Exec {
		del := globalArgs(s.cfg, s.dir)
		if derr := s.runQuiet(del.argv([]string{"delete", "--force", s.id})); derr != nil {
			s.log.warn("cleanup after a failed start: " + derr.Error())
		}
	}
	return err
}
