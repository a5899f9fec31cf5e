package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/cri/crilog"
	"github.com/evjournal/containerd/cri/streaming"
	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/specs"
	"github.com/evjournal/containerd/supervisor"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Exec, Attach and PortForward answer a one-time URL of the streaming
// server (cri/streaming), which calls back the methods of streamRuntime
// once the client connects. The ids are checked here, before a URL is
// handed out: once streaming, an error only travels inside the stream.

func (s *Server) Exec(ctx context.Context, r *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	if _, err := s.runningContainer(ctx, r.GetContainerId()); err != nil {
		return nil, toStatus(err)
	}
	resp, err := s.stream.GetExec(r)
	return resp, toStatus(err)
}

func (s *Server) Attach(ctx context.Context, r *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	if _, err := s.runningContainer(ctx, r.GetContainerId()); err != nil {
		return nil, toStatus(err)
	}
	c, err := s.recs.container(r.GetContainerId())
	if err != nil {
		return nil, toStatus(err)
	}
	if r.GetStdin() && !c.cfg.GetStdin() {
		return nil, toStatus(fmt.Errorf("attach: container %s was created without stdin: %w", c.rec.ID, errdefs.ErrInvalidArgument))
	}
	resp, err := s.stream.GetAttach(r)
	return resp, toStatus(err)
}

func (s *Server) PortForward(ctx context.Context, r *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	sb, err := s.recs.sandbox(r.GetPodSandboxId())
	if err != nil {
		return nil, toStatus(err)
	}
	if _, err := s.readyPod(ctx, sb); err != nil {
		return nil, toStatus(err)
	}
	resp, err := s.stream.GetPortForward(r)
	return resp, toStatus(err)
}

// streamRuntime is what the streaming server calls.
type streamRuntime struct{ s *Server }

var _ streaming.Runtime = streamRuntime{}

// Exec runs cmd as an exec process of the supervisor, its stdio through
// FIFOs copied to and from the stream; the pty's size follows resize, and
// the end of the client's stdin closes the process's.
func (rt streamRuntime) Exec(ctx context.Context, id string, cmd []string, stdin io.Reader, stdout, stderr io.WriteCloser,
	tty bool, resize <-chan streaming.TermSize) (int, error) {
	s := rt.s
	c, err := s.recs.container(id)
	if err != nil {
		return 0, err
	}
	id = c.rec.ID
	// The init's process spec around the command, filled in by the loop
	// (InheritInit), as for ExecSync: no State call (a pid scan on the
	// read lane) before the exec.
	spec := specs.ProcessSpec{Args: cmd, Terminal: tty}
	pid := "exec-" + shortRandom()
	dir := filepath.Join(s.cfg.StateDir, "exec", id+"-"+pid)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	var stdio runtime.Stdio
	var outs []*outputFifo
	for _, o := range []struct {
		w    io.Writer
		name string
		path *string
	}{{stdout, "stdout", &stdio.Stdout}, {stderr, "stderr", &stdio.Stderr}} {
		if o.w == nil || (o.name == "stderr" && tty) {
			continue
		}
		f, err := openOutputFifo(filepath.Join(dir, o.name), o.w)
		if err != nil {
			return 0, err
		}
		defer f.close()
		outs = append(outs, f)
		*o.path = f.path
	}
	var in *os.File
	if stdin != nil {
		stdio.Stdin = filepath.Join(dir, "stdin")
		if err := syscall.Mkfifo(stdio.Stdin, 0o600); err != nil {
			return 0, fmt.Errorf("mkfifo %s: %w", stdio.Stdin, err)
		}
		// Read-write: the open does not wait for the shim, and the shim's
		// reads see EOF once we close it (it holds no other writer but its
		// keep-alive, dropped by the close-stdin message).
		if in, err = os.OpenFile(stdio.Stdin, os.O_RDWR, 0); err != nil {
			return 0, err
		}
		defer in.Close()
	}
	w, stop, err := s.sup.WatchExit(ctx, id, pid)
	if err != nil {
		return 0, fmt.Errorf("container %s: exec: %w", id, err)
	}
	defer stop()
	// Ephemeral, as ExecSync's: kubectl exec must work on a full disk
	// (docs/cri.md, "Durable or ephemeral"), and its stream ends with the
	// daemon anyway, so a restart has nothing to give back to anyone.
	if _, err := s.sup.Exec(ctx, supervisor.ExecRequest{ID: id, Pid: pid, Spec: spec, Stdio: stdio, Ephemeral: true, InheritInit: true}); err != nil {
		return 0, s.execError(ctx, id, err)
	}
	if in != nil {
		go func() {
			io.Copy(in, stdin)
			in.Close()
			s.sup.UpdateProcess(context.WithoutCancel(ctx), supervisor.ProcessUpdate{ID: id, Pid: pid, CloseStdin: true})
		}()
	}
	if resize != nil {
		go func() {
			for sz := range resize {
				s.sup.UpdateProcess(ctx, supervisor.ProcessUpdate{ID: id, Pid: pid, Width: uint32(sz.Width), Height: uint32(sz.Height)})
			}
		}()
	}
	var exit exitInfo
	select {
	case exit = <-w:
	case <-ctx.Done():
		s.sup.Signal(context.WithoutCancel(ctx), id, pid, syscall.SIGKILL)
		return 0, ctx.Err()
	}
	collect(outs...)
	return int(exit.Status), nil
}

// Attach connects a client to a running container's init: what it writes
// goes to the container's stdin FIFO (its end, with stdin_once, closes the
// container's stdin), and the container's output is followed from its CRI
// log as it grows, from the moment of the attach, until the container exits
// or the client goes.
func (rt streamRuntime) Attach(ctx context.Context, id string, stdin io.Reader, stdout, stderr io.WriteCloser, tty bool, resize <-chan streaming.TermSize) error {
	s := rt.s
	c, err := s.recs.container(id)
	if err != nil {
		return err
	}
	id = c.rec.ID
	if _, err := s.runningContainer(ctx, id); err != nil {
		return err
	}
	w, stop, err := s.sup.WatchExit(ctx, id, "init")
	if err != nil {
		return fmt.Errorf("container %s: attach: %w", id, err)
	}
	defer stop()
	log, err := os.Open(s.outputLog(c))
	if err != nil {
		return fmt.Errorf("container %s: attach: %w", id, err)
	}
	defer log.Close()
	if _, err := log.Seek(0, io.SeekEnd); err != nil {
		return err
	}
	if stdin != nil {
		fifo, err := os.OpenFile(filepath.Join(s.containerDir(id), "stdin"), os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return fmt.Errorf("container %s: attach stdin: %w", id, err)
		}
		syscall.SetNonblock(int(fifo.Fd()), false)
		once := c.cfg.GetStdinOnce()
		go func() {
			io.Copy(fifo, stdin)
			fifo.Close()
			if once {
				s.sup.UpdateProcess(context.WithoutCancel(ctx), supervisor.ProcessUpdate{ID: id, Pid: "init", CloseStdin: true})
			}
		}()
	}
	if resize != nil {
		go func() {
			for sz := range resize {
				s.sup.UpdateProcess(ctx, supervisor.ProcessUpdate{ID: id, Pid: "init", Width: uint32(sz.Width), Height: uint32(sz.Height)})
			}
		}()
	}
	f := &logFollower{r: log, stdout: stdout, stderr: stderr}
	tick := time.NewTicker(followEvery)
	defer tick.Stop()
	for {
		if err := f.copyNew(); err != nil {
			return err
		}
		select {
		case <-w:
			// The shim writes the last output before it exits, within its
			// drain bound; what is in the file now is the output.
			return f.copyNew()
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// followEvery is how often an attached client's log is read for new output.
const followEvery = 50 * time.Millisecond

// logFollower copies the records appended to a CRI log to the attached
// client's streams, the line's newline back on full records.
type logFollower struct {
	r              io.Reader
	stdout, stderr io.Writer
	rest           []byte // an incomplete record at the end of the file so far
	buf            [32 << 10]byte
}

func (f *logFollower) copyNew() error {
	for {
		n, err := f.r.Read(f.buf[:])
		f.rest = append(f.rest, f.buf[:n]...)
		for {
			i := bytes.IndexByte(f.rest, '\n')
			if i < 0 {
				break
			}
			if err := f.emit(f.rest[:i]); err != nil {
				return err
			}
			f.rest = f.rest[i+1:]
		}
		if n == 0 || err != nil {
			return nil
		}
	}
}

func (f *logFollower) emit(line []byte) error {
	rec, err := crilog.ParseRecord(line)
	if err != nil {
		return nil // not a record (a rotated file's tail): skipped
	}
	w := f.stdout
	if rec.Stream == crilog.Stderr && f.stderr != nil {
		w = f.stderr
	}
	if w == nil {
		return nil
	}
	out := rec.Content
	if !rec.Partial {
		out = append(out, '\n')
	}
	_, err = w.Write(out)
	return err
}

// PortForward connects the stream to the port on the pod's loopback: in its
// network namespace, or the host's for a host-network pod.
func (rt streamRuntime) PortForward(ctx context.Context, podID string, port int32, stream io.ReadWriteCloser) error {
	sb, err := rt.s.recs.sandbox(podID)
	if err != nil {
		return err
	}
	netns := sb.rec.NetNS
	if netns != "" {
		return streaming.ForwardInNetNS(ctx, netns, port, stream)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
	if err != nil {
		return fmt.Errorf("port forward to host port %d: %w", port, err)
	}
	defer conn.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(conn, stream); conn.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	go func() { io.Copy(stream, conn); done <- struct{}{} }()
	select {
	case <-done:
		<-done
	case <-ctx.Done():
	}
	return nil
}
