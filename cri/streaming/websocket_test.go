package streaming

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestExecWebsocket: the library also serves websocket clients, but only
// up to the v4 channel protocol, which cannot say "end of stdin" (v5 can;
// kubelet and the API server talk SPDY to a CRI streaming server anyway).
// So this exec has no stdin.
func TestExecWebsocket(t *testing.T) {
	f := newFakeRuntime()
	s := startServer(t, f)
	resp, err := s.GetExec(&runtimeapi.ExecRequest{ContainerId: "c1", Cmd: []string{"cat", "5"}, Stdout: true, Stderr: true})
	if err != nil {
		t.Fatal(err)
	}
	exe, err := remotecommand.NewWebSocketExecutorForProtocols(&rest.Config{}, "GET", resp.Url, "v4.channel.k8s.io")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err = exe.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
	var exit utilexec.CodeExitError
	if !errors.As(err, &exit) || exit.Code != 5 {
		t.Fatalf("err = %v, want exit code 5", err)
	}
	if stdout.Len() != 0 || stderr.String() != "to stderr\n" {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
}
