package streaming

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
)

// needRoot skips a test that needs root, or fails it under CI=true, where
// a skipped test would hide a broken machine.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root")
		}
		t.Skip("needs root")
	}
}

// fakeRuntime behaves by container id and command, and reports what it
// saw on channels (buffered, so a missing reader never blocks it).
type fakeRuntime struct {
	netns     string        // port forwards to sandbox "pod1" go there
	stdinEOF  chan string   // the id of an exec or attach whose stdin ended
	started   chan struct{} // a "block" exec began
	cancelled chan error    // a "block" exec's context ended, with this cause
}

func newFakeRuntime() *fakeRuntime {
	return &fakeRuntime{
		stdinEOF:  make(chan string, 16),
		started:   make(chan struct{}, 16),
		cancelled: make(chan error, 16),
	}
}

// Exec runs one of:
//
//	cat [code]  stdin to stdout, a line to stderr, exits with code
//	tty         writes each of two resize events, then stdin, to stdout
//	block       waits for its context
//	flood       writes to stdout until a write fails, deaf to its context
func (f *fakeRuntime) Exec(ctx context.Context, id string, cmd []string, stdin io.Reader, stdout, stderr io.WriteCloser, tty bool, resize <-chan TermSize) (int, error) {
	if id != "c1" {
		return 0, fmt.Errorf("container %q: %w", id, errdefs.ErrNotFound)
	}
	switch cmd[0] {
	case "cat":
		code := 0
		if len(cmd) > 1 {
			code, _ = strconv.Atoi(cmd[1])
		}
		if stderr != nil {
			fmt.Fprintln(stderr, "to stderr")
		}
		return code, f.echo(id, stdin, stdout)
	case "tty":
		if !tty || stderr != nil || resize == nil {
			return 0, fmt.Errorf("tty %v, stderr %v, resize %v: %w", tty, stderr, resize, errdefs.ErrInvalidArgument)
		}
		for range 2 {
			select {
			case size := <-resize:
				fmt.Fprintf(stdout, "%dx%d\n", size.Width, size.Height)
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		return 0, f.echo(id, stdin, stdout)
	case "flood":
		f.started <- struct{}{}
		buf := make([]byte, 32<<10)
		for {
			if _, err := stdout.Write(buf); err != nil {
				f.cancelled <- err
				return 0, err
			}
		}
	case "block":
		f.started <- struct{}{}
		<-ctx.Done()
		f.cancelled <- ctx.Err()
		return 0, ctx.Err()
	}
	return 127, nil
}

func (f *fakeRuntime) echo(id string, stdin io.Reader, stdout io.Writer) error {
	if stdin == nil {
		return nil
	}
	if _, err := io.Copy(stdout, stdin); err != nil {
		return err
	}
	f.stdinEOF <- id
	return nil
}

func (f *fakeRuntime) Attach(ctx context.Context, id string, stdin io.Reader, stdout, stderr io.WriteCloser, tty bool, resize <-chan TermSize) error {
	if id != "c1" {
		return fmt.Errorf("container %q: %w", id, errdefs.ErrNotFound)
	}
	fmt.Fprintln(stdout, "attached")
	return f.echo(id, stdin, stdout)
}

func (f *fakeRuntime) PortForward(ctx context.Context, sandbox string, port int32, stream io.ReadWriteCloser) error {
	if sandbox != "pod1" {
		return fmt.Errorf("sandbox %q: %w", sandbox, errdefs.ErrNotFound)
	}
	return ForwardInNetNS(ctx, f.netns, port, stream)
}

// startServer starts a server whose cleanup stops it and then checks that
// the goroutines it and its clients started are gone.
func startServer(t *testing.T, rt Runtime) *Server {
	t.Helper()
	before := runtime.NumGoroutine()
	s, err := New(Config{}, rt)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
		waitGoroutines(t, before)
	})
	return s
}

// goroutineSlack allows for goroutines that libraries start once per
// process, on first use (none seen so far: the bound is exact).
const goroutineSlack = 0

// waitGoroutines waits until the goroutine count is back to before (plus
// slack): connections end asynchronously after a close, so the count is
// polled against a deadline rather than read once.
func waitGoroutines(t *testing.T, before int) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for runtime.NumGoroutine() > before+goroutineSlack {
		select {
		case <-tick.C:
		case <-deadline:
			var buf bytes.Buffer
			_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
			t.Fatalf("goroutines: %d before, %d after stop:\n%s", before, runtime.NumGoroutine(), buf.String())
		}
	}
}

// spdyExec streams opts to the URL the way kubectl exec does (SPDY).
func spdyExec(t *testing.T, rawURL string, opts remotecommand.StreamOptions) error {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	exe, err := remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", u)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return exe.StreamWithContext(ctx, opts)
}

// recv waits for a fake's report.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}
