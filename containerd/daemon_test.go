package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/integration/fixture"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// daemonBin is bin/containerd built for these tests by TestMain.
var daemonBin string

func TestMain(m *testing.M) {
	if os.Getenv("CTRD_ACTIVATION_HELPER") != "" {
		os.Exit(activationHelper())
	}
	dir, err := os.MkdirTemp("", "ctrd-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	daemonBin = filepath.Join(dir, "containerd")
	if out, err := exec.Command("go", "build", "-o", daemonBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build containerd: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testDaemon is one started bin/containerd.
type testDaemon struct {
	cmd            *exec.Cmd
	stdout, stderr fixture.SyncBuffer
	sock, stateDir string
	done           chan error
}

func startDaemon(t *testing.T, stateDir string, extra ...string) *testDaemon {
	t.Helper()
	d := &testDaemon{stateDir: stateDir, sock: filepath.Join(stateDir, "c.sock"), done: make(chan error, 1)}
	args := append([]string{"--state-dir", stateDir, "--journal-dir", stateDir + ".journal", "--listen", "unix://" + d.sock}, extra...)
	d.cmd = exec.Command(daemonBin, args...)
	d.cmd.Stdout, d.cmd.Stderr = &d.stdout, &d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() {
		d.cmd.Process.Kill()
		<-d.done
	})
	return d
}

// waitServing waits until the health service answers SERVING.
func (d *testDaemon) waitServing(t *testing.T) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+d.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	h := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := h.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return conn
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("daemon not serving; log:\n%s", d.stderr.String())
	return nil
}

func TestDaemonLifecycle(t *testing.T) {
	base := shortTempDir(t)
	stateDir := filepath.Join(base, "state")
	d := startDaemon(t, stateDir)
	conn := d.waitServing(t)

	if fi, err := os.Stat(stateDir); err != nil || fi.Mode().Perm() != 0o711 {
		t.Errorf("state dir: %v, %v; want mode 0711", fi.Mode(), err)
	}
	if fi, err := os.Stat(d.sock); err != nil || fi.Mode().Perm() != 0o660 || fi.Mode().Type() != os.ModeSocket {
		t.Errorf("socket: %v, %v; want a 0660 socket", fi.Mode(), err)
	}

	// One daemon per state dir.
	second := exec.Command(daemonBin, "--state-dir", stateDir, "--journal-dir", filepath.Join(base, "other.journal"),
		"--listen", "unix://"+filepath.Join(base, "other.sock"))
	var errOut bytes.Buffer
	second.Stderr = &errOut
	want := fmt.Sprintf("another containerd is running with state dir %s (pid %d)", stateDir, d.cmd.Process.Pid)
	if err := second.Run(); err == nil || !strings.Contains(errOut.String(), want) {
		t.Errorf("second daemon: %v\n%s\nwant %q", err, errOut.String(), want)
	}
	// And one per journal dir.
	second = exec.Command(daemonBin, "--state-dir", filepath.Join(base, "other"), "--journal-dir", stateDir+".journal",
		"--listen", "unix://"+filepath.Join(base, "other.sock"))
	errOut.Reset()
	second.Stderr = &errOut
	want = fmt.Sprintf("another containerd is running with journal dir %s (pid %d)", stateDir+".journal", d.cmd.Process.Pid)
	if err := second.Run(); err == nil || !strings.Contains(errOut.String(), want) {
		t.Errorf("second daemon on the same journal dir: %v\n%s\nwant %q", err, errOut.String(), want)
	}

	api := types.NewAPIClient(conn)
	h := healthpb.NewHealthClient(conn)
	if _, err := h.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "types.API"}); err == nil ||
		!strings.Contains(err.Error(), "unknown service") {
		t.Errorf("health of a named service: %v", err)
	}
	v, err := api.GetServerVersion(context.Background(), &types.GetServerVersionRequest{})
	if err != nil || v.GetMinor() != 2 || v.GetPatch() != 9 {
		t.Fatalf("version %v, %v", v, err)
	}
	stream, err := api.Events(context.Background(), &types.EventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Header(); err != nil { // the handler runs: the stream is subscribed
		t.Fatal(err)
	}

	start := time.Now()
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		d.done <- err
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, d.stderr.String())
		}
	case <-time.After(2 * time.Second):
		t.Fatalf("still running 2 s after SIGTERM\n%s", d.stderr.String())
	}
	t.Logf("stopped in %v", time.Since(start))
	if _, err := stream.Recv(); err == nil {
		t.Error("event stream still open after the daemon stopped")
	}
	if _, err := os.Stat(d.sock); !os.IsNotExist(err) {
		t.Errorf("socket left behind: %v", err)
	}
	if d.stdout.String() != "" {
		t.Errorf("stdout: %q", d.stdout.String())
	}
}

func TestDaemonStartupErrors(t *testing.T) {
	base := shortTempDir(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--listen", filepath.Join(base, "x.sock")}, "want proto://address"},
		{[]string{"--journal-sync", "never"}, "--journal-sync"},
		{[]string{"--pprof-address", "256.0.0.1:1"}, "--pprof-address"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			cmd := exec.Command(daemonBin, append([]string{"--state-dir", filepath.Join(base, "s"), "--journal-dir", filepath.Join(base, "j")}, tt.args...)...)
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			err := cmd.Run()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(errOut.String(), tt.want) || out.Len() != 0 {
				t.Fatalf("err %v, stdout %q, stderr %q; want exit 1 mentioning %q", err, out.String(), errOut.String(), tt.want)
			}
		})
	}
}

// A stale socket left by a killed daemon is replaced; SIGUSR1 dumps stacks
// to the log; the metrics endpoint serves Prometheus text.
func TestDaemonRestartAndDebug(t *testing.T) {
	stateDir := filepath.Join(shortTempDir(t), "state")
	d := startDaemon(t, stateDir)
	d.waitServing(t)
	d.cmd.Process.Kill()
	<-d.done
	d.done <- nil

	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := tcp.Addr().String()
	tcp.Close()
	d = startDaemon(t, stateDir, "--metrics-address", addr)
	d.waitServing(t)
	d.cmd.Process.Signal(syscall.SIGUSR1)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(d.stderr.String(), "goroutine stacks") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(d.stderr.String(), "goroutine stacks") {
		t.Error("no stack dump after SIGUSR1")
	}
	resp, err := httpGet("http://" + addr + "/metrics")
	if err != nil || !strings.Contains(resp, "# TYPE containerd_containers gauge") {
		t.Errorf("metrics: %v\n%s", err, resp)
	}
}

func httpGet(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
