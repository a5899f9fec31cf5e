package runtime

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/evjournal/containerd/internal/oneproc"
	"golang.org/x/sys/unix"
)

// shimProc is a shim this daemon started: its pid and a pidfd to signal and
// reap it without racing pid reuse. Not os.Process, though it holds a pidfd
// too (Go >= 1.23): its Wait blocks without a bound, so each live shim would
// need a goroutine parked in it for days, while the daemon reaps a shim only
// once its exit is known, with a bounded non-blocking waitid on the pidfd
// that also gives the signal that killed it (reapPidfdSignal).
type shimProc struct {
	pid   int
	pidfd int
}

// startReport is the one JSON line the shim writes on its start pipe (fd 3).
type startReport struct {
	Pid   int    `json:"pid"`
	Error string `json:"error"`
	// Runtime: the error is runc's own failure (its message is verbatim).
	Runtime bool `json:"runtime"`
	// Op "start": the shim's `runc start` failed with Status (-1: runc did
	// not run) and combined Output, answered as the daemon's own failed
	// `runc start` is.
	Op     string `json:"op"`
	Status int    `json:"status"`
	Output string `json:"output"`
}

// lookShim resolves the shim binary; a missing one is "<shim> not installed on system".
func lookShim(shim string) (string, error) {
	path, err := exec.LookPath(shim)
	if err != nil {
		return "", shimNotInstalled(shim)
	}
	return path, nil
}

// startProcess starts the shim at path with args in dir, in its own
// session, with files as its fds 0, 1, 2, 3...
func startProcess(path string, args []string, dir string, files []*os.File) (*shimProc, error) {
	pidfd := -1
	proc, err := os.StartProcess(path, append([]string{path}, args...), &os.ProcAttr{
		Dir: dir, Env: shimEnv(), Files: files,
		Sys: &syscall.SysProcAttr{Setsid: true, PidFD: &pidfd},
	})
	if errors.Is(err, os.ErrNotExist) {
		return nil, shimNotInstalled(path)
	}
	if err != nil {
		return nil, fmt.Errorf("start shim %s: %w", path, err)
	}
	sp := &shimProc{pid: proc.Pid, pidfd: pidfd}
	if sp.pidfd < 0 { // no pidfd from clone: the unreaped child's pid is still ours
		sp.pidfd, _ = unix.PidfdOpen(proc.Pid, 0)
	}
	proc.Release() // the shim is reaped through the pidfd, never by os.Process
	return sp, nil
}

// kill SIGKILLs the shim and reaps it (bounded).
func (s *shimProc) kill() {
	if s.pidfd < 0 {
		return
	}
	unix.PidfdSendSignal(s.pidfd, unix.SIGKILL, nil, 0)
	reapPidfd(s.pidfd, shimReapTimeout)
	closeFD(&s.pidfd)
}

// readStartReport waits for the shim's start line, bounded by ctx and
// timeout. Its errors are the v0.2 texts: ErrStartTimeout, ErrShimExited, or
// ctx.Err() when the caller went away.
func readStartReport(ctx context.Context, r *os.File, timeout time.Duration) (*startReport, error) {
	if err := r.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { r.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	line, err := bufio.NewReader(r).ReadString('\n')
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, ErrStartTimeout
	case err != nil && !errors.Is(err, io.EOF):
		return nil, fmt.Errorf("read shim start report: %w", err)
	case strings.TrimSpace(line) == "":
		return nil, ErrShimExited
	}
	var rep startReport
	if err := json.Unmarshal([]byte(line), &rep); err != nil {
		return nil, fmt.Errorf("shim start report %q: %w", line, err)
	}
	return &rep, nil
}

// shimEnv is the daemon's environment with GOMAXPROCS=1: a shim needs one
// thread, and given it from the start it skips re-executing itself to
// drop the threads a larger GOMAXPROCS would make (about 1 ms per start).
func shimEnv() []string { return oneproc.Env(os.Environ()) }
