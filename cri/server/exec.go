package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/specs"
	"github.com/evjournal/containerd/supervisor"
	"github.com/evjournal/containerd/supervisor/objects"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// outputDrainWait bounds the wait for an exec's last output once it exited
// (the shim drains and closes its end within its own bound).
const outputDrainWait = 10 * time.Second

// ExecSync runs a command in a running container as an exec process of the
// supervisor, collects its output through FIFOs and returns its exit code.
// A timeout kills the command and answers DeadlineExceeded.
func (s *Server) ExecSync(ctx context.Context, r *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	if len(r.GetCmd()) == 0 {
		return nil, toStatus(fmt.Errorf("exec: cmd is empty: %w", errdefs.ErrInvalidArgument))
	}
	id, err := s.runningContainer(ctx, r.GetContainerId())
	if err != nil {
		return nil, toStatus(err)
	}
	// The exec runs the init's process spec with the command's args: the
	// loop fills it in (InheritInit), so no State call (a pid scan on the
	// read lane) precedes every probe.
	spec := specs.ProcessSpec{Args: r.GetCmd()}
	out, err := s.execSync(ctx, id, spec, time.Duration(r.GetTimeout())*time.Second)
	if err != nil {
		return nil, toStatus(err)
	}
	return out, nil
}

func (s *Server) execSync(ctx context.Context, id string, spec specs.ProcessSpec, timeout time.Duration) (*runtimeapi.ExecSyncResponse, error) {
	pid := "execsync-" + shortRandom()
	dir := filepath.Join(s.cfg.StateDir, "exec", id+"-"+pid)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	// Removed beside the reply rather than before it; a daemon killed
	// first leaves it to the start-up's sweep of the exec dir.
	defer func() { go os.RemoveAll(dir) }()
	out := newExecOutput(s.execBudget)
	defer out.release()
	stdout, err := openOutputFifo(filepath.Join(dir, "stdout"), out.Stdout())
	if err != nil {
		return nil, err
	}
	defer stdout.close()
	stderr, err := openOutputFifo(filepath.Join(dir, "stderr"), out.Stderr())
	if err != nil {
		return nil, err
	}
	defer stderr.close()
	w, stop, err := s.sup.WatchExit(ctx, id, pid)
	if err != nil {
		return nil, fmt.Errorf("container %s: exec: %w", id, err)
	}
	defer stop()
	// DirectOutput: the command writes into our FIFOs itself, which we
	// hold open and drain whatever it writes (execOutput keeps what fits).
	if _, err := s.sup.Exec(ctx, supervisor.ExecRequest{ID: id, Pid: pid, Spec: spec, Ephemeral: true, InheritInit: true, DirectOutput: true,
		Stdio: runtime.Stdio{Stdout: stdout.path, Stderr: stderr.path}}); err != nil {
		return nil, s.execError(ctx, id, err)
	}
	if timeout <= 0 {
		timeout = 365 * 24 * time.Hour
	}
	exit, err := awaitExit(ctx, w, timeout)
	if err != nil {
		s.sup.Signal(context.WithoutCancel(ctx), id, pid, syscall.SIGKILL)
		if ctx.Err() == nil {
			err = fmt.Errorf("container %s: command %q timed out after %v: %w", id, spec.Args, timeout, context.DeadlineExceeded)
		}
		return nil, err
	}
	collect(stdout, stderr)
	o, e, dropped := out.reply()
	if dropped > 0 {
		s.log.WithField("container", id).Debugf("exec %q: %d bytes of output dropped (the reply's bound, or the daemon's budget)", spec.Args, dropped)
	}
	return &runtimeapi.ExecSyncResponse{Stdout: o, Stderr: e, ExitCode: int32(exit.Status)}, nil
}

// execError is a failed exec's error: one whose container stopped running
// meanwhile (its state dir is gone, and the shim's start may fail with
// anything) is FailedPrecondition, as for one that was not running.
func (s *Server) execError(ctx context.Context, id string, err error) error {
	if o, oerr := s.objectOf(context.WithoutCancel(ctx), id); oerr == nil && o.State != objects.Running {
		return fmt.Errorf("container %s is %s, not running: %w (exec: %v)", id, o.State, errdefs.ErrFailedPrecondition, err)
	}
	return fmt.Errorf("container %s: exec: %w", id, err)
}

func shortRandom() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// outputFifo is a FIFO an exec writes to and we read, with our own write
// end held until the exec exited: without it, a read before the shim
// opened the FIFO would see end-of-file.
type outputFifo struct {
	path string
	rd   *os.File
	wr   *os.File
	done chan struct{}
}

// openOutputFifo makes the FIFO and copies what comes out of it to w (an
// execOutput's stream, which keeps what fits and drops the rest).
func openOutputFifo(path string, w io.Writer) (*outputFifo, error) {
	if err := unix.Mkfifo(path, 0o600); err != nil {
		return nil, fmt.Errorf("mkfifo %s: %w", path, err)
	}
	rd, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	wr, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		rd.Close()
		return nil, err
	}
	f := &outputFifo{path: path, rd: rd, wr: wr, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		io.Copy(w, rd) // w never fails: a writer must not block on a full FIFO
	}()
	return f, nil
}

// collect closes our write ends and waits until the exec's writers are gone
// too and everything was copied, bounded by outputDrainWait in all. All
// ends are closed first: the exit is known, so each copy's end of file is
// due at once, and the copies finish side by side rather than one after
// the other (each is a wake-up of its goroutine, then of ours).
func collect(fifos ...*outputFifo) {
	for _, f := range fifos {
		f.wr.Close()
	}
	bound := time.NewTimer(outputDrainWait)
	defer bound.Stop()
	for _, f := range fifos {
		select {
		case <-f.done:
		case <-bound.C:
			for _, g := range fifos {
				g.rd.Close()
			}
			<-f.done
		}
	}
}

func (f *outputFifo) close() {
	f.wr.Close()
	f.rd.Close()
	<-f.done
}
