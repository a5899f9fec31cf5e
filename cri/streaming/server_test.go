package streaming

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestExec(t *testing.T) {
	f := newFakeRuntime()
	s := startServer(t, f)

	t.Run("streams and exit code", func(t *testing.T) {
		resp, err := s.GetExec(&runtimeapi.ExecRequest{ContainerId: "c1", Cmd: []string{"cat", "3"}, Stdin: true, Stdout: true, Stderr: true})
		if err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		err = spdyExec(t, resp.Url, remotecommand.StreamOptions{Stdin: strings.NewReader("hello\n"), Stdout: &stdout, Stderr: &stderr})
		var exit utilexec.CodeExitError
		if !errors.As(err, &exit) || exit.Code != 3 {
			t.Fatalf("err = %v, want exit code 3", err)
		}
		if stdout.String() != "hello\n" || stderr.String() != "to stderr\n" {
			t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
		}
		if id := recv(t, f.stdinEOF, "stdin EOF"); id != "c1" {
			t.Errorf("EOF from %q", id)
		}
	})

	t.Run("zero exit", func(t *testing.T) {
		resp, err := s.GetExec(&runtimeapi.ExecRequest{ContainerId: "c1", Cmd: []string{"cat"}, Stdout: true})
		if err != nil {
			t.Fatal(err)
		}
		var stdout bytes.Buffer
		if err := spdyExec(t, resp.Url, remotecommand.StreamOptions{Stdout: &stdout}); err != nil {
			t.Fatal(err)
		}
		if stdout.Len() != 0 {
			t.Errorf("stdout %q", stdout.String())
		}
	})

	t.Run("tty and resize", func(t *testing.T) {
		resp, err := s.GetExec(&runtimeapi.ExecRequest{ContainerId: "c1", Cmd: []string{"tty"}, Stdin: true, Stdout: true, Tty: true})
		if err != nil {
			t.Fatal(err)
		}
		var stdout bytes.Buffer
		sizes := &sizeQueue{sizes: []remotecommand.TerminalSize{{Width: 80, Height: 24}, {Width: 132, Height: 43}}}
		err = spdyExec(t, resp.Url, remotecommand.StreamOptions{Stdin: strings.NewReader("typed\n"), Stdout: &stdout, Tty: true, TerminalSizeQueue: sizes})
		if err != nil {
			t.Fatal(err)
		}
		if want := "80x24\n132x43\ntyped\n"; stdout.String() != want {
			t.Errorf("stdout %q, want %q", stdout.String(), want)
		}
		recv(t, f.stdinEOF, "stdin EOF")
	})

	t.Run("unknown container", func(t *testing.T) {
		resp, err := s.GetExec(&runtimeapi.ExecRequest{ContainerId: "nope", Cmd: []string{"cat"}, Stdout: true})
		if err != nil {
			t.Fatal(err)
		}
		err = spdyExec(t, resp.Url, remotecommand.StreamOptions{Stdout: &bytes.Buffer{}})
		if err == nil || !strings.Contains(err.Error(), `container "nope": not found`) {
			t.Fatalf("err = %v, want the runtime's not found", err)
		}
	})

	t.Run("one-time url", func(t *testing.T) {
		resp, err := s.GetExec(&runtimeapi.ExecRequest{ContainerId: "c1", Cmd: []string{"cat"}, Stdout: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := spdyExec(t, resp.Url, remotecommand.StreamOptions{Stdout: &bytes.Buffer{}}); err != nil {
			t.Fatal(err)
		}
		err = spdyExec(t, resp.Url, remotecommand.StreamOptions{Stdout: &bytes.Buffer{}})
		if err == nil || !strings.Contains(err.Error(), "404") {
			t.Fatalf("second use: err = %v, want a 404", err)
		}
	})
}

// sizeQueue hands out its sizes, then nil: the client stops resizing.
type sizeQueue struct {
	sizes []remotecommand.TerminalSize
}

func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	if len(q.sizes) == 0 {
		return nil
	}
	s := q.sizes[0]
	q.sizes = q.sizes[1:]
	return &s
}

func TestAttach(t *testing.T) {
	f := newFakeRuntime()
	s := startServer(t, f)

	resp, err := s.GetAttach(&runtimeapi.AttachRequest{ContainerId: "c1", Stdin: true, Stdout: true})
	if err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	if err := spdyExec(t, resp.Url, remotecommand.StreamOptions{Stdin: strings.NewReader("input\n"), Stdout: &stdout}); err != nil {
		t.Fatal(err)
	}
	if want := "attached\ninput\n"; stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout.String(), want)
	}
	recv(t, f.stdinEOF, "stdin EOF")

	resp, err = s.GetAttach(&runtimeapi.AttachRequest{ContainerId: "nope", Stdout: true})
	if err != nil {
		t.Fatal(err)
	}
	err = spdyExec(t, resp.Url, remotecommand.StreamOptions{Stdout: &bytes.Buffer{}})
	if err == nil || !strings.Contains(err.Error(), `container "nope": not found`) {
		t.Fatalf("err = %v, want the runtime's not found", err)
	}
}

func TestValidation(t *testing.T) {
	s := startServer(t, newFakeRuntime())
	cmd := []string{"true"}
	for _, tc := range []struct {
		name string
		get  func() error
		msg  string // "" for a valid request
	}{
		{"exec ok", execReq(s, &runtimeapi.ExecRequest{ContainerId: "c", Cmd: cmd, Stdout: true}), ""},
		{"exec tty", execReq(s, &runtimeapi.ExecRequest{ContainerId: "c", Cmd: cmd, Stdin: true, Stdout: true, Tty: true}), ""},
		{"exec no id", execReq(s, &runtimeapi.ExecRequest{Cmd: cmd, Stdout: true}), "container id is empty"},
		{"exec no cmd", execReq(s, &runtimeapi.ExecRequest{ContainerId: "c", Stdout: true}), "cmd is empty"},
		{"exec no output", execReq(s, &runtimeapi.ExecRequest{ContainerId: "c", Cmd: cmd, Stdin: true}), "one of stdout and stderr"},
		{"exec tty stderr", execReq(s, &runtimeapi.ExecRequest{ContainerId: "c", Cmd: cmd, Stdout: true, Stderr: true, Tty: true}), "tty and stderr"},
		{"attach stdin only", attachReq(s, &runtimeapi.AttachRequest{ContainerId: "c", Stdin: true}), ""},
		{"attach no id", attachReq(s, &runtimeapi.AttachRequest{Stdout: true}), "container id is empty"},
		{"attach no stream", attachReq(s, &runtimeapi.AttachRequest{ContainerId: "c"}), "one of stdin, stdout and stderr"},
		{"attach tty stderr", attachReq(s, &runtimeapi.AttachRequest{ContainerId: "c", Stderr: true, Tty: true}), "tty and stderr"},
		{"port forward ok", pfReq(s, &runtimeapi.PortForwardRequest{PodSandboxId: "p", Port: []int32{80}}), ""},
		{"port forward no id", pfReq(s, &runtimeapi.PortForwardRequest{Port: []int32{80}}), "pod sandbox id is empty"},
		{"port forward bad port", pfReq(s, &runtimeapi.PortForwardRequest{PodSandboxId: "p", Port: []int32{70000}}), "out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.get()
			if tc.msg == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want invalid argument with %q", err, tc.msg)
			}
		})
	}
}

func execReq(s *Server, r *runtimeapi.ExecRequest) func() error {
	return func() error { _, err := s.GetExec(r); return err }
}

func attachReq(s *Server, r *runtimeapi.AttachRequest) func() error {
	return func() error { _, err := s.GetAttach(r); return err }
}

func pfReq(s *Server, r *runtimeapi.PortForwardRequest) func() error {
	return func() error { _, err := s.GetPortForward(r); return err }
}

// TestStopEndsStreams: Stop cancels a running exec, closes its connection
// and leaves no goroutine behind (startServer's cleanup checks that after
// this test's own Stop, which must then be a no-op).
func TestStopEndsStreams(t *testing.T) {
	f := newFakeRuntime()
	s := startServer(t, f)
	resp, err := s.GetExec(&runtimeapi.ExecRequest{ContainerId: "c1", Cmd: []string{"block"}, Stdout: true})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- spdyExec(t, resp.Url, remotecommand.StreamOptions{Stdout: &bytes.Buffer{}}) }()
	recv(t, f.started, "exec start")

	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, f.cancelled, "exec cancel"); err == nil {
		t.Error("exec context not cancelled")
	}
	// The client learns why its stream ended, not a clean exit.
	if err := recv(t, done, "client end"); err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("client: %v, want the cancellation", err)
	}
	if _, err := s.GetExec(&runtimeapi.ExecRequest{ContainerId: "c1", Cmd: []string{"cat"}, Stdout: true}); !errdefs.IsUnavailable(err) {
		t.Errorf("GetExec after Stop: %v, want unavailable", err)
	}
	if err := s.Start(); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("Start after Stop: %v, want failed precondition", err)
	}
}

// TestStopCutsDeafCalls: a runtime call that ignores its context (as one
// blocked writing to a client that does not read would) is ended by
// cutting its connection once the grace period is over.
func TestStopCutsDeafCalls(t *testing.T) {
	f := newFakeRuntime()
	s := startServer(t, f)
	s.grace = 50 * time.Millisecond
	resp, err := s.GetExec(&runtimeapi.ExecRequest{ContainerId: "c1", Cmd: []string{"flood"}, Stdout: true})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- spdyExec(t, resp.Url, remotecommand.StreamOptions{Stdout: io.Discard}) }()
	recv(t, f.started, "exec start")
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, f.cancelled, "write error"); err == nil {
		t.Error("flood ended without a write error")
	}
	recv(t, done, "client end")
}

func TestStopBeforeStart(t *testing.T) {
	s, err := New(Config{Addr: "127.0.0.1:0"}, newFakeRuntime())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") || strings.HasSuffix(s.Addr(), ":0") {
		t.Errorf("Addr() = %q, want the real port", s.Addr())
	}
	resp, err := s.GetPortForward(&runtimeapi.PortForwardRequest{PodSandboxId: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "http://" + s.Addr() + "/portforward/"; !strings.HasPrefix(resp.Url, want) {
		t.Errorf("url %q, want prefix %q", resp.Url, want)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}
