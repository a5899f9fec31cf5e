package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/integration/fixture"
)

// Daemon is bin/containerd on a private state dir, socket and runc root,
// which may be killed and started again on the same dirs. Its log (all
// starts) is Dir/daemon.log.
type Daemon struct {
	env      *Env
	Dir      string
	StateDir string
	// JournalDir is the state dir too: the reliability checks read and
	// damage the journal files there.
	JournalDir string
	RuncRoot   string
	Socket     string
	LogPath    string
	// Extra flags, after the ones that point it at the private dirs.
	Extra []string
	// PprofAddr is where --pprof-address serves (goroutine counts).
	PprofAddr string
	// Binary and ShimBinary are the daemon and shim it runs: bin/'s,
	// unless a run sets others (the bench's A/B of two builds).
	Binary, ShimBinary string

	cmd    *exec.Cmd
	exited chan struct{}
	conn   *grpc.ClientConn
	Client types.APIClient
}

// NewDaemon prepares a daemon under <env>/<name>; Env.Close destroys it:
// the daemon is killed, every container of its runc root force-deleted and
// every process referring to its dir killed.
func (e *Env) NewDaemon(name string, extra ...string) (*Daemon, error) {
	dir := e.Path(name)
	d := &Daemon{env: e, Dir: dir, StateDir: filepath.Join(dir, "state"), JournalDir: filepath.Join(dir, "state"), RuncRoot: filepath.Join(dir, "runc"),
		Socket: filepath.Join(dir, "c.sock"), LogPath: filepath.Join(dir, "daemon.log"), Extra: extra,
		Binary: e.Bins.Containerd, ShimBinary: e.Bins.Shim}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	d.PprofAddr = "127.0.0.1:" + strconv.Itoa(port)
	e.Defer(d.Destroy)
	return d, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Flags is the daemon's command line.
func (d *Daemon) Flags() []string {
	return append([]string{
		"--state-dir", d.StateDir, "--journal-dir", d.JournalDir, "--listen", "unix://" + d.Socket,
		"--runtime", d.env.Bins.Runc, "--runtime-args", "--root=" + d.RuncRoot,
		"--shim", d.ShimBinary, "--pprof-address", d.PprofAddr,
	}, d.Extra...)
}

// Spawn starts the daemon process and a client for it, without waiting.
func (d *Daemon) Spawn() error {
	if d.Alive() {
		return fmt.Errorf("daemon already running (pid %d)", d.Pid())
	}
	logf, err := os.OpenFile(d.LogPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "=== bench: starting daemon at %s\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(d.Binary, d.Flags()...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start daemon: %w", err)
	}
	d.cmd = cmd
	d.exited = make(chan struct{})
	exited := d.exited
	go func() { cmd.Wait(); close(exited) }()
	return d.connect()
}

// connect makes a client whose dialer retries every 2 ms, so the first
// RPC after a (re)start waits for the socket instead of grpc's 1 s
// reconnect backoff: restore times are measured to the millisecond.
func (d *Daemon) connect() error {
	if d.conn != nil {
		d.conn.Close()
	}
	sock := d.Socket
	conn, err := grpc.NewClient("unix://"+sock,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)),
		grpc.WithContextDialer(WaitingUnixDialer(sock)))
	if err != nil {
		return err
	}
	d.conn = conn
	d.Client = types.NewAPIClient(conn)
	return nil
}

// WaitingUnixDialer dials the unix socket sock, retrying every 2 ms until
// the dial's context ends: the first call after a daemon's (re)start waits
// for its socket instead of failing.
func WaitingUnixDialer(sock string) func(ctx context.Context, _ string) (net.Conn, error) {
	return func(ctx context.Context, _ string) (net.Conn, error) {
		for {
			var dl net.Dialer
			c, err := dl.DialContext(ctx, "unix", sock)
			if err == nil {
				return c, nil
			}
			select {
			case <-ctx.Done():
				return nil, err
			case <-time.After(2 * time.Millisecond):
			}
		}
	}
}

// NewClient opens another connection to the daemon (own HTTP/2 flow
// control), with extra dial options. The caller closes it.
func (d *Daemon) NewClient(opts ...grpc.DialOption) (*grpc.ClientConn, types.APIClient, error) {
	sock := d.Socket
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var dl net.Dialer
			return dl.DialContext(ctx, "unix", sock)
		})}, opts...)
	conn, err := grpc.NewClient("unix://"+sock, opts...)
	if err != nil {
		return nil, nil, err
	}
	return conn, types.NewAPIClient(conn), nil
}

// WaitServing polls the health service until SERVING.
func (d *Daemon) WaitServing(ctx context.Context) error {
	h := healthpb.NewHealthClient(d.conn)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		r, err := h.Check(cctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
		cancel()
		if err == nil && r.Status == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		if !d.Alive() {
			return fmt.Errorf("daemon exited during start-up; log tail:\n%s", d.LogTail(20))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("daemon not serving (%v): %w; log tail:\n%s", err, ctx.Err(), d.LogTail(20))
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// Start spawns the daemon and waits (at most 60 s) until it serves.
func (d *Daemon) Start() error {
	if err := d.Spawn(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return d.WaitServing(ctx)
}

// Pid is the daemon's pid (0 before the first start).
func (d *Daemon) Pid() int {
	if d.cmd == nil || d.cmd.Process == nil {
		return 0
	}
	return d.cmd.Process.Pid
}

// Alive reports whether the daemon process runs.
func (d *Daemon) Alive() bool {
	if d.exited == nil {
		return false
	}
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// Kill SIGKILLs the daemon (a crash) and waits until it is gone.
func (d *Daemon) Kill() error { return d.signal(syscall.SIGKILL, 10*time.Second) }

func (d *Daemon) signal(sig syscall.Signal, limit time.Duration) error {
	if !d.Alive() {
		return nil
	}
	d.cmd.Process.Signal(sig)
	select {
	case <-d.exited:
	case <-time.After(limit):
		d.cmd.Process.Kill()
		<-d.exited
		return fmt.Errorf("daemon did not exit within %s of %v", limit, sig)
	}
	if d.conn != nil {
		d.conn.Close()
		d.conn = nil
	}
	return nil
}

// Runc is bare runc on the daemon's runc root.
func (d *Daemon) Runc() Runc { return Runc{Bin: d.env.Bins.Runc, Root: d.RuncRoot} }

// Destroy kills the daemon, force-deletes its containers and kills every
// process still referring to its directory. Idempotent.
func (d *Daemon) Destroy() {
	d.Kill()
	d.Runc().DeleteAll()
	fixture.Leaks(d.Dir)
}

// LogTail returns the last n lines of the daemon's log.
func (d *Daemon) LogTail(n int) string {
	data, _ := os.ReadFile(d.LogPath)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// LogLines returns the log lines (of every start) containing sub, at most
// the last n of them.
func (d *Daemon) LogLines(sub string, n int) []string {
	data, _ := os.ReadFile(d.LogPath)
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, sub) || strings.HasPrefix(l, "=== bench: starting daemon") {
			out = append(out, l)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

// LogCount counts the log lines containing sub.
func (d *Daemon) LogCount(sub string) int {
	data, _ := os.ReadFile(d.LogPath)
	return strings.Count(string(data), sub)
}

// Goroutines reads the daemon's live goroutine count from pprof.
func (d *Daemon) Goroutines() (int, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + d.PprofAddr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	buf := make([]byte, 256)
	n, _ := resp.Body.Read(buf)
	// First line: "goroutine profile: total N"
	line, _, _ := strings.Cut(string(buf[:n]), "\n")
	f := strings.Fields(line)
	if len(f) == 0 {
		return 0, errors.New("empty goroutine profile")
	}
	return strconv.Atoi(f[len(f)-1])
}
