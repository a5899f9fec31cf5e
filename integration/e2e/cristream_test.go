package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	utilexec "k8s.io/client-go/util/exec"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestCRIStreaming: Exec and PortForward through the daemon's streaming
// server, driven by client-go as kubectl drives them: an exec runs in the
// container's environment, its stdin
// reaches the process and its end closes the process's stdin, stdout and
// stderr come back apart, the exit code is the client's error; a forwarded
// port reaches a server listening in the pod's network namespace.
func TestCRIStreaming(t *testing.T) {
	t.Parallel()
	e := newCRIEnv(t)
	ctx := cctx(t)
	ref := e.pushTestinit(t, "e2e/stream:1")
	if _, err := e.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
		t.Fatal(err)
	}
	podCfg := e.podConfig(t, "stream")
	run, err := e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podCfg})
	if err != nil {
		t.Fatal(err)
	}
	cr, err := e.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: run.PodSandboxId, SandboxConfig: podCfg,
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "srv"}, Image: &runtimeapi.ImageSpec{Image: ref},
			Args: []string{"serve", "8080", "forwarded", "--", "sleep", "forever"},
			Envs: []*runtimeapi.KeyValue{{Key: "STREAM_ENV", Value: []byte("the container's")}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cr.ContainerId}); err != nil {
		t.Fatal(err)
	}

	resp, err := e.rt.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: cr.ContainerId, Stdin: true, Stdout: true, Stderr: true,
		Cmd: []string{"/testinit", "env", "STREAM_ENV", "--", "cat", "--", "stderr", "after eof", "--", "exit", "4"}})
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	u, err := url.Parse(resp.Url)
	if err != nil {
		t.Fatal(err)
	}
	exe, err := remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", u)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	err = exe.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader("line one\nline two\n"), Stdout: &stdout, Stderr: &stderr})
	var exit utilexec.CodeExitError
	if !errors.As(err, &exit) || exit.Code != 4 {
		t.Fatalf("exec: %v, want exit code 4", err)
	}
	// The exec runs in the init's environment (the loop fills in the
	// init's process spec around the command).
	if stdout.String() != "env STREAM_ENV=the container's\nline one\nline two\n" || stderr.String() != "after eof\n" {
		t.Fatalf("exec: stdout %q stderr %q", stdout.String(), stderr.String())
	}
	_, err = e.rt.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: "0123456789abcdef", Stdout: true, Cmd: []string{"x"}})
	wantCRICode(t, "Exec in an unknown container", err, codes.NotFound)

	// Attach to a container created with stdin (stdin_once): what the
	// client writes reaches its init, its output comes back, and the end of
	// the client's stdin ends the container's.
	ca, err := e.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: run.PodSandboxId, SandboxConfig: podCfg,
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "cat"}, Image: &runtimeapi.ImageSpec{Image: ref},
			Args: []string{"cat"}, Stdin: true, StdinOnce: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: ca.ContainerId}); err != nil {
		t.Fatal(err)
	}
	ar, err := e.rt.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: ca.ContainerId, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	au, err := url.Parse(ar.Url)
	if err != nil {
		t.Fatal(err)
	}
	aexe, err := remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", au)
	if err != nil {
		t.Fatal(err)
	}
	// The client writes, waits for the echo while its stdin stays open
	// (as kubectl attach does), then ends its stdin.
	out, errOut := &syncBuffer{}, &syncBuffer{}
	stdinR, stdinW := io.Pipe()
	streamDone := make(chan error, 1)
	go func() {
		streamDone <- aexe.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdinR, Stdout: out, Stderr: errOut})
	}()
	if _, err := io.WriteString(stdinW, "hello attach\n"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the attached container's echo", func() bool { return out.String() == "hello attach\n" })
	stdinW.Close()
	if err := <-streamDone; err != nil {
		t.Fatalf("attach stream: %v", err)
	}
	if out.String() != "hello attach\n" || errOut.String() != "" {
		t.Fatalf("attach: stdout %q stderr %q, want the echo of stdin", out.String(), errOut.String())
	}
	if cs := wantState(t, e, ca.ContainerId, runtimeapi.ContainerState_CONTAINER_EXITED); cs.ExitCode != 0 {
		t.Fatalf("the attached cat exited %d after its stdin ended, want 0", cs.ExitCode)
	}

	pf, err := e.rt.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: run.PodSandboxId, Port: []int32{8080}})
	if err != nil {
		t.Fatalf("PortForward: %v", err)
	}
	pu, err := url.Parse(pf.Url)
	if err != nil {
		t.Fatal(err)
	}
	trip, upgrader, err := spdy.RoundTripperFor(&rest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	dialer := spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: trip}, "POST", pu)
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ready := make(chan struct{})
	fw, err := portforward.NewOnAddressesForStreamingWithContext(fctx, dialer, []string{"127.0.0.1"}, []string{"0:8080"}, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	forwarding := make(chan error, 1)
	go func() { forwarding <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-forwarding:
		t.Fatalf("port forward: %v", err)
	}
	ports, err := fw.GetPorts()
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0].Local))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	c.Close()
	if err != nil || string(got) != "forwarded\n" {
		t.Fatalf("through the forwarded port: %q %v", got, err)
	}
	cancel()
	<-forwarding
	removePod(t, e, run.PodSandboxId)
}

// syncBuffer is a bytes.Buffer safe for a writer goroutine and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitUntil polls cond (output arriving has no event to await) within eventWait.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(eventWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, eventWait)
		}
		time.Sleep(pollEvery)
	}
}
