package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PeerVersion is the containerd release the cri group measures beside the
// daemon; `make bench-peer` builds it into PeerDir.
const PeerVersion = "v2.3.4"

// PeerDir is where `make bench-peer` (bench/peer/build-containerd.sh)
// leaves containerd and containerd-shim-runc-v2.
func PeerDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bench", "build", "containerd-"+PeerVersion), nil
}

// Peer is containerd 2.x with its CRI plugin, started by the bench on
// private root, state, socket and shim socket dirs from a generated
// config.toml: the run's bin/runc (the runc options' BinaryName, and a
// runc root of its own), the CNI plugins of /usr/lib/cni with a network of
// its own, the sandbox image pulled from the run's registry (a hosts.toml
// for it, plain http). Env.Close kills it with its shims and containers
// and removes what its pods leave.
type Peer struct {
	env      *Env
	Bin      string // containerd
	Shim     string // containerd-shim-runc-v2
	Dir      string
	Socket   string // gRPC: the CRI and containerd's own API
	RuncRoot string
	Net      *CNINet
	// PodParent is the pods' cgroup parent (cgroupfs), LogDir where their
	// logs go.
	PodParent, LogDir string
	LogPath           string
	Version           string // "containerd v2.3.4", from its --version
	RT                runtimeapi.RuntimeServiceClient
	Img               runtimeapi.ImageServiceClient

	cmd    *exec.Cmd
	exited chan struct{}
}

// NewPeer prepares containerd from binDir (not started: Start) under
// <env>/<name>; sandboxImage is the pods' pause image on reg.
func (e *Env) NewPeer(name, binDir string, reg *Registry, sandboxImage string) (*Peer, error) {
	p := &Peer{env: e, Bin: filepath.Join(binDir, "containerd"), Shim: filepath.Join(binDir, "containerd-shim-runc-v2"),
		Dir: e.Path(name), PodParent: "/" + e.Tag + "-pods-" + name}
	for _, b := range []string{p.Bin, p.Shim} {
		if _, err := os.Stat(b); err != nil {
			return nil, fmt.Errorf("containerd peer: %w (run `make bench-peer`)", err)
		}
	}
	out, err := exec.Command(p.Bin, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --version: %w", p.Bin, err)
	}
	// "containerd github.com/containerd/containerd/v2 v2.3.4 <revision>"
	p.Version = strings.TrimSpace(string(out))
	if f := strings.Fields(p.Version); len(f) >= 3 {
		p.Version = "containerd " + f[2]
	}
	p.Socket, p.RuncRoot = filepath.Join(p.Dir, "c.sock"), filepath.Join(p.Dir, "runc")
	p.LogDir, p.LogPath = filepath.Join(p.Dir, "logs"), filepath.Join(p.Dir, "containerd.log")
	if err := os.MkdirAll(p.Dir, 0o711); err != nil {
		return nil, err
	}
	if p.Net, err = e.NewCNINet(p.Dir, name); err != nil {
		return nil, err
	}
	e.Defer(p.Destroy)
	if err := p.writeConfig(reg, sandboxImage); err != nil {
		return nil, err
	}
	conn, err := DialCRI(p.Socket)
	if err != nil {
		return nil, err
	}
	e.Defer(func() { conn.Close() })
	p.RT, p.Img = runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn)
	return p, nil
}

// writeConfig writes config.toml (containerd's own defaults but for the
// paths, the runtime's binaries and the plugins that would reach outside
// the run) and the registry's hosts.toml.
func (p *Peer) writeConfig(reg *Registry, sandboxImage string) error {
	hosts := filepath.Join(p.Dir, "certs.d")
	if reg != nil {
		dir := filepath.Join(hosts, reg.Host)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		h := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", "http://"+reg.Host, "http://"+reg.Host)
		if err := os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(h), 0o644); err != nil {
			return err
		}
	}
	// The shims' sockets: a dir of the run (at most 38 characters, or
	// containerd refuses it) instead of /run/containerd/s.
	sockDir := filepath.Join(p.Dir, "s")
	if len(sockDir) > 38 {
		d, err := os.MkdirTemp("/tmp", "c2s")
		if err != nil {
			return err
		}
		p.env.Defer(func() { os.RemoveAll(d) })
		sockDir = d
	}
	conf := fmt.Sprintf(`# Written by the bench (bench/internal/harness/peer.go).
version = 4
root = %[1]q
state = %[2]q
imports = []
# NRI would serve /var/run/nri/nri.sock, opt would populate /opt/containerd:
# both outside the run's dirs, and neither is used by the CRI calls timed.
disabled_plugins = ['io.containerd.nri.v1.nri', 'io.containerd.internal.v1.opt']

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = %[3]q
    [plugins.'io.containerd.cri.v1.images'.registry]
      config_path = %[4]q

  [plugins.'io.containerd.cri.v1.runtime']
    # Lowering a child's oom_score_adj below the bench's own fails here
    # (runc init: permission denied); the daemon measured beside it raises
    # the pause's -998 to what it may set, the same as this does.
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        # The shim is found on containerd's PATH (Start), not by
        # runtime_path: with a path, every task create would first run
        # "<path> -info" (it knows io.containerd.runc.v2 without it).
        runtime_type = 'io.containerd.runc.v2'
        sandboxer = 'podsandbox'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = %[5]q
          Root = %[6]q
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['/usr/lib/cni']
      conf_dir = %[7]q
      max_conf_num = 1

  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = '127.0.0.1'
    stream_server_port = '0'

  [plugins.'io.containerd.server.v1.grpc']
    address = %[8]q

  [plugins.'io.containerd.server.v1.ttrpc']
    address = %[9]q

  [plugins.'io.containerd.shim.v1.manager']
    socket_dir = %[10]q

  [plugins.'io.containerd.transfer.v1.local']
    config_path = %[4]q
`, filepath.Join(p.Dir, "root"), filepath.Join(p.Dir, "state"), sandboxImage, hosts, p.env.Bins.Runc,
		p.RuncRoot, p.Net.ConfDir, p.Socket, p.Socket+".ttrpc", sockDir)
	return os.WriteFile(filepath.Join(p.Dir, "config.toml"), []byte(conf), 0o644)
}

// Start starts containerd and waits (at most 60 s) until its CRI says the
// runtime and the network are ready (the CNI config is loaded).
func (p *Peer) Start() error {
	logf, err := os.OpenFile(p.LogPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(p.Bin, "--config", filepath.Join(p.Dir, "config.toml"))
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(p.Shim)+":"+os.Getenv("PATH"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start containerd: %w", err)
	}
	p.cmd, p.exited = cmd, make(chan struct{})
	exited := p.exited
	go func() { cmd.Wait(); close(exited) }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		r, err := p.RT.Status(ctx, &runtimeapi.StatusRequest{})
		if err == nil && ready(r.GetStatus()) {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("containerd exited during start-up; log tail:\n%s", tail(p.LogPath, 20))
		case <-ctx.Done():
			return fmt.Errorf("containerd not ready (%v, %v); log tail:\n%s", err, r.GetStatus(), tail(p.LogPath, 20))
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func ready(s *runtimeapi.RuntimeStatus) bool {
	n := 0
	for _, c := range s.GetConditions() {
		if (c.Type == runtimeapi.RuntimeReady || c.Type == runtimeapi.NetworkReady) && c.Status {
			n++
		}
	}
	return n == 2
}

// Pid is containerd's pid (0 before Start).
func (p *Peer) Pid() int {
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Shims lists containerd's live shims: the peer's shim binary serving this
// containerd's socket.
func (p *Peer) Shims() []Proc {
	return Procs(func(x Proc) bool {
		return x.State != "Z" && strings.HasPrefix(x.Exe, p.Shim) && strings.Contains(strings.Join(x.Args, " "), p.Socket)
	})
}

// Destroy kills containerd, its shims and every container of its runc
// root, then removes what its pods leave: mounts under its dir (netns
// pins, rootfs and shm mounts), the pods' cgroups, the network's bridge
// and iptables rules. Idempotent.
func (p *Peer) Destroy() {
	if p.exited != nil {
		select {
		case <-p.exited:
		default:
			p.cmd.Process.Kill()
			<-p.exited
		}
	}
	for _, s := range p.Shims() {
		syscall.Kill(s.Pid, syscall.SIGKILL)
	}
	// The runc shim's runc root is Root/<namespace>: the CRI's is k8s.io.
	Runc{Bin: p.env.Bins.Runc, Root: filepath.Join(p.RuncRoot, "k8s.io")}.DeleteAll()
	for _, s := range p.Shims() { // a shim that was in the middle of a start
		syscall.Kill(s.Pid, syscall.SIGKILL)
	}
	UnmountUnder(p.Dir)
	RemoveCgroupParent(p.PodParent)
	p.Net.Remove()
}

func tail(path string, n int) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
