// Command containerd-shim holds the life of ONE container process (the init
// or one exec) for the containerd daemon, so that the process outlives the
// daemon. It is started as
//
//	containerd-shim <container-id> <bundle> <runtime>
//
// in the process's state directory, with the start pipe as fd 3. It runs
// `runc create` (or `exec -d`, `restore -d`), reports the pid or runc's own
// error on the start pipe, copies the process's stdio, obeys the control
// fifo, reaps every child, and on the process's exit writes exitStatus, then
// the status on the exit fifo the daemon watches, closes it, drains the
// output (bounded) and exits. docs/shim-contract.md is the full agreement
// with the daemon.
package main

import (
	"errors"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/evjournal/containerd/internal/oneproc"
	"golang.org/x/sys/unix"
)

func main() {
	reexecWithOneP()
	tune()
	os.Exit(run(os.Args))
}

// reexecWithOneP restarts the shim in place (same pid, same fds; exec keeps
// both) with GOMAXPROCS=1 in its environment, unless it is there already.
// Before main runs, the Go runtime sizes its per-P state and starts threads
// by the CPU count, and keeps them after runtime.GOMAXPROCS(1): on a 64-CPU
// host that costs the shim over 1 MB of resident memory. An exec of the
// (cached, static) binary costs about a millisecond. If it fails, the shim
// goes on as it is.
func reexecWithOneP() {
	if os.Getenv("GOMAXPROCS") == "1" {
		return
	}
	syscall.Exec("/proc/self/exe", os.Args, oneproc.Env(os.Environ()))
}

// tune keeps the shim small: there is one shim per container process, and
// an idle shim only waits on a few fds, so it needs one P and little heap.
//
// Once started, the shim allocates next to nothing (copies reuse their
// buffers), so the GC is off and the memory limit is its only trigger: the
// runtime's own mappings take about 4.5 MiB of it, which leaves some 3.5 MiB
// of garbage before a collection. With the GC on, the forced collection
// every two minutes touches pages the scavenger then keeps, and an idle
// shim would grow by some 400 kB within minutes.
func tune() {
	runtime.GOMAXPROCS(1)
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(memoryLimit)
}

// memoryLimit is the shim's soft memory limit (see tune).
const memoryLimit = 8 << 20

// args are the shim's three positional arguments.
type args struct {
	id      string
	bundle  string
	runtime string
}

func parseArgs(argv []string) (args, error) {
	if len(argv) != 4 {
		return args{}, errors.New("usage: containerd-shim <container-id> <bundle> <runtime>")
	}
	a := args{id: argv[1], bundle: argv[2], runtime: argv[3]}
	if a.id == "" || a.bundle == "" {
		return args{}, errors.New("container id and bundle must not be empty")
	}
	return a, nil
}

// run is the whole life of the shim; its result is the shim's exit code:
// 0 once the container process has exited and its status is written, 1 when
// the process could not be started (or the shim could not set itself up).
func run(argv []string) int {
	oomFrom := ownOOMScore
	var pre *prepared
	if len(argv) == 2 && argv[1] == spareArg {
		pre = prepare() // while idle: see prepared
		var ok bool
		if argv, ok = awaitAssignment(argv[0]); !ok {
			return 0
		}
		oomFrom = parentOOMScore()
	}
	if _, err := parseArgs(argv); err != nil {
		// Not started by the daemon (a person at a shell, say): say so on
		// stderr and leave no shim-log.json in a directory not ours.
		os.Stderr.WriteString("containerd-shim: " + err.Error() + "\n")
		return 2
	}
	if pre == nil {
		pre = prepare()
	}
	sp := openStartPipe()
	log := openLog("shim-log.json")
	s, err := setup(argv, log, oomFrom, pre)
	if err != nil {
		log.error(err.Error())
		sp.fail(err)
		return 1
	}
	return s.run(sp)
}

// prepared is the part of setup that does not depend on the process: a
// spare does it while it waits for its assignment, so that the assignment
// does not wait for it (the reaper's signal set-up above all, some 0.08 ms).
// A spare has no child, so being a subreaper with a reaper changes nothing
// for it until it starts runc. A shim started for its process (by hand, or
// by the tests; the daemon starts spares) does it first thing.
type prepared struct {
	reaper    *reaper
	startTime string // ours, for shim.starttime
	err       error  // reported once there is a process to report it for
}

func prepare() *prepared {
	if err := becomeSubreaper(); err != nil {
		return &prepared{err: err}
	}
	start, err := startTime(os.Getpid())
	if err != nil {
		return &prepared{err: err}
	}
	return &prepared{reaper: newReaper(), startTime: start}
}

// becomeSubreaper makes us the session leader (EPERM when the daemon
// already did) and the child subreaper: what runc starts and leaves, the
// container process first, is reparented to us.
func becomeSubreaper() error {
	unix.Setsid()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return wrap("set child subreaper", err)
	}
	return nil
}

// setup does what must hold before anything is started: a session of our
// own, the child subreaper flag, the reaper, the exit fifo held open, our
// pid files, and process.json; pre holds the first of these, done already.
func setup(argv []string, log *logger, oomFrom string, pre *prepared) (*shim, error) {
	a, err := parseArgs(argv)
	if err != nil {
		return nil, err
	}
	if pre.err != nil {
		return nil, pre.err
	}
	if err := adjustOOMScore(oomFrom); err != nil {
		log.warn("oom_score_adj: " + err.Error() + " (the shim keeps the daemon's)")
	}
	dir, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	if err := holdExitFifo("exit"); err != nil {
		return nil, err
	}
	s := &shim{args: a, dir: dir, log: log, mountNS: -1}
	if s.cfg, err = readConfig("process.json"); err != nil {
		return nil, err
	}
	if err := writeSelf(dir, pre.startTime, !s.cfg.Ephemeral); err != nil {
		return nil, err
	}
	s.reaper = pre.reaper
	if a.runtime != "" { // the command line wins over process.json
		s.cfg.Runtime = a.runtime
	}
	if s.cfg.Runtime == "" {
		s.cfg.Runtime = "runc"
	}
	return s, nil
}

// exitFifo is the write end of the exit fifo, held from the start. At the
// reap, notifyExit writes the status on it and closes it; if the shim dies
// first, the kernel closes it. Either way its hang-up is how the daemon
// learns the process is gone. A raw fd, so no finalizer can close it.
var exitFifo = -1

func holdExitFifo(path string) error {
	// The daemon opened the read end before starting us, so this does not
	// block; without a reader it fails with ENXIO instead of hanging.
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return wrap("open exit fifo", err)
	}
	exitFifo = fd
	return nil
}

// notifyExit writes "<status> <reap time, unix ns>\n" on the exit fifo and
// closes it. The daemon's epoll sees the hang-up at once and reads the
// status from the fifo, so it has it even when exitStatus could not be
// written (a full disk), and without waiting for the output to drain. The
// line is far below PIPE_BUF and the fifo is empty: one atomic write. With
// no reader (the daemon is restarting) the write fails with EPIPE and only
// the hang-up and exitStatus remain, which is what a restarted daemon reads.
func notifyExit(status int, reaped time.Time) error {
	if exitFifo < 0 {
		return errors.New("not open")
	}
	line := strconv.Itoa(status) + " " + strconv.FormatInt(reaped.UnixNano(), 10) + "\n"
	_, err := unix.Write(exitFifo, []byte(line))
	unix.Close(exitFifo)
	exitFifo = -1
	if err != nil {
		return wrap("write exit status", err)
	}
	return nil
}
