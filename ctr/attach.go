package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/console"
	"github.com/evjournal/containerd/api/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

const (
	// resubscribeDelay is the wait before following events again after a
	// stream error (v0.2.9's ctr waited 1 s too).
	resubscribeDelay = time.Second
	// drainTimeout bounds the wait for the output copies after the exit.
	drainTimeout = 2 * time.Second
	// exitTransportClosing is ctr's status when the daemon went away while
	// it waited (128 + SIGHUP, as in v0.2.9).
	exitTransportClosing = 129
)

// target names the process an attached ctr waits for: the exit of pid in
// container id, once the start event named by started has been seen for it.
type target struct {
	id, pid string
	started string // "start-container" (pid "init") or "start-process"
	tty     bool
}

// runAttached creates a process with ctr's FIFOs as its stdio, streams them,
// and returns the process's exit status as an *exitStatus error. It follows
// the events from before the create, so the exit cannot be missed.
func runAttached(cl *client, t target, create func(stdin, stdout, stderr string) error) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fifos, err := newFifoSet(ctx)
	if err != nil {
		return err
	}
	defer fifos.Close()
	w, err := newExitWaiter(ctx, cl, t)
	if err != nil {
		return err
	}
	if err := create(fifos.stdin, fifos.stdout, fifos.stderr); err != nil {
		return err
	}
	aio := startIO(ctx, cl, t, fifos)
	defer aio.stop()
	code := waitOrSignal(w)
	aio.drain(fifos)
	return &exitStatus{code: code}
}

// waitOrSignal waits for the exit, or for a signal that ends ctr: then the
// deferred cleanups still run (terminal reset, FIFOs removed) and ctr exits
// with 128 + the signal.
func waitOrSignal(w *exitWaiter) int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	done := make(chan int, 1)
	go func() { done <- w.wait() }()
	select {
	case code := <-done:
		return code
	case sig := <-sigs:
		return 128 + int(sig.(syscall.Signal))
	}
}

// attachedIO copies ctr's stdio to and from the FIFOs.
type attachedIO struct {
	con     console.Console // set when the local terminal is in raw mode
	outputs sync.WaitGroup
	stopped chan struct{}
}

func startIO(ctx context.Context, cl *client, t target, f *fifoSet) *attachedIO {
	a := &attachedIO{stopped: make(chan struct{})}
	out, errOut, in := stdout, stderr, stdin
	a.outputs.Add(2)
	go func() { defer a.outputs.Done(); io.Copy(out, f.outR) }()
	go func() { defer a.outputs.Done(); io.Copy(errOut, f.errR) }()
	if t.tty {
		if con, err := console.ConsoleFromFile(os.Stdin); err == nil && con.SetRaw() == nil {
			a.con = con
			go a.resizes(ctx, cl, t)
		}
	}
	go copyStdin(ctx, cl, t, in, f.in)
	return a
}

// copyStdin copies local stdin to the process and, on local EOF, closes the
// FIFO and asks the daemon to drop its hold, so the process sees EOF.
func copyStdin(ctx context.Context, cl *client, t target, from io.Reader, to io.WriteCloser) {
	io.Copy(to, from)
	to.Close()
	cl.UpdateProcess(ctx, &types.UpdateProcessRequest{Id: t.id, Pid: t.pid, CloseStdin: true})
}

// resizes sends the terminal size now and on every SIGWINCH.
func (a *attachedIO) resizes(ctx context.Context, cl *client, t target) {
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	for {
		if size, err := a.con.Size(); err == nil {
			cl.UpdateProcess(ctx, &types.UpdateProcessRequest{Id: t.id, Pid: t.pid, Width: uint32(size.Width), Height: uint32(size.Height)})
		}
		select {
		case <-winch:
		case <-a.stopped:
			return
		case <-ctx.Done():
			return
		}
	}
}

// drain lets the output copies finish once the process has exited: with
// the keep-alive ends closed, they end at EOF when the shim is gone.
func (a *attachedIO) drain(f *fifoSet) {
	f.releaseOutputs()
	done := make(chan struct{})
	go func() { a.outputs.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(drainTimeout):
	}
}

// stop restores the terminal.
func (a *attachedIO) stop() {
	close(a.stopped)
	if a.con != nil {
		a.con.Reset()
	}
}

// exitWaiter follows a container's events to find a process's exit.
type exitWaiter struct {
	ctx     context.Context
	cl      *client
	t       target
	req     *types.EventsRequest
	stream  types.API_EventsClient
	started bool
}

// newExitWaiter subscribes before the process is created. It replays from
// now, so the events of the create arrive even if the daemon registers the
// subscription after handling the create.
func newExitWaiter(ctx context.Context, cl *client, t target) (*exitWaiter, error) {
	w := &exitWaiter{ctx: ctx, cl: cl, t: t,
		req: &types.EventsRequest{Id: t.id, Timestamp: timestamppb.New(time.Now())}}
	stream, err := cl.Events(ctx, w.req)
	if err != nil {
		return nil, err
	}
	w.stream = stream
	return w, nil
}

// wait returns the exit status of the target. On a stream error it
// resubscribes after a second, resuming after the last event seen; if the
// daemon went away (transport closing) it returns 129.
func (w *exitWaiter) wait() int {
	for {
		ev, err := w.recv()
		if err != nil {
			if isTransportClosing(err) {
				return exitTransportClosing
			}
			w.resubscribe()
			continue
		}
		if code, done := w.handle(ev); done {
			return code
		}
	}
}

func (w *exitWaiter) recv() (*types.Event, error) {
	if w.stream == nil {
		return nil, errors.New("not subscribed")
	}
	ev, err := w.stream.Recv()
	if err != nil {
		w.stream = nil
		return nil, err
	}
	w.req = resumeAfter(w.req, ev)
	return ev, nil
}

func (w *exitWaiter) resubscribe() {
	select {
	case <-time.After(resubscribeDelay):
	case <-w.ctx.Done():
		return
	}
	if s, err := w.cl.Events(w.ctx, w.req); err == nil {
		w.stream = s
	}
}

// handle looks at one event: the start event of the target arms the wait,
// and the target's exit after it ends it. An exit before the start belongs
// to an earlier container with the same id.
func (w *exitWaiter) handle(ev *types.Event) (int, bool) {
	if ev.GetId() != w.t.id {
		return 0, false
	}
	switch ev.GetType() {
	case w.t.started:
		if w.t.started == "start-container" || ev.GetPid() == w.t.pid {
			w.started = true
		}
	case "exit":
		if w.started && ev.GetPid() == w.t.pid {
			return exitCodeOf(ev.GetStatus()), true
		}
	}
	return 0, false
}

func exitCodeOf(status uint32) int {
	if status > 255 {
		return 255
	}
	return int(status)
}

// isTransportClosing reports whether err says the daemon closed the
// connection: v0.2 clients see "transport is closing", current grpc-go
// reports the daemon's hard stop as Unavailable.
func isTransportClosing(err error) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	msg := st.Message()
	if strings.Contains(msg, "transport is closing") {
		return true
	}
	return st.Code() == codes.Unavailable && !strings.Contains(msg, "resume after seq")
}
