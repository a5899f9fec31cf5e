package reliability

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/evjournal/containerd/bench/internal/harness"
	"github.com/evjournal/containerd/integration/fixture"
)

// criNode is a daemon of the suite serving CRI (--cri-listen), with a CNI
// network of its own (a bridge with masquerading and host ports, so that
// a pod makes iptables rules), an image of the test init in a registry of
// the run, and the checks of fixture.CRINode.
type criNode struct {
	d     *harness.Daemon
	check *fixture.CRINode
	rt    runtimeapi.RuntimeServiceClient
	img   runtimeapi.ImageServiceClient
	image string // pulled already
	// podParent is the pods' cgroup parent, logDir where their logs go.
	podParent, logDir string
}

// startCRINode starts a CRI daemon named name and pulls the test init.
func (s *Suite) startCRINode(name string) (*criNode, error) {
	env := s.env
	reg := env.NewRegistry()
	ref, err := reg.PushTestinit(env.Bins.Testinit, "rel/testinit:1", "sleep", "forever")
	if err != nil {
		return nil, fmt.Errorf("push the test init's image: %w", err)
	}
	d, err := env.NewDaemon(name)
	if err != nil {
		return nil, err
	}
	n := &criNode{d: d, podParent: "/" + env.Tag + "-pods", logDir: filepath.Join(d.Dir, "logs")}
	n.check = &fixture.CRINode{Runc: env.Bins.Runc, RuncRoot: d.RuncRoot, Dir: d.Dir, StateDir: d.StateDir,
		Root: filepath.Join(d.Dir, "root"), CgroupParent: n.podParent}
	confDir, err := n.network(env)
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(d.Dir, "cri.sock")
	d.Extra = append(d.Extra, "--cri-listen", sock, "--root", n.check.Root, "--cni-conf-dir", confDir,
		"--insecure-registry", reg.Host, "--sandbox-pause", env.Bins.Pause)
	if err := n.connect(env, sock); err != nil {
		return nil, err
	}
	if err := n.restart(); err != nil {
		return nil, err
	}
	return n, n.pull(ref)
}

// network writes the node's CNI config: a bridge of its own (removed at
// the end) on a random /24, host-local leases in the node's dir.
func (n *criNode) network(env *harness.Env) (string, error) {
	var b [2]byte
	rand.Read(b[:])
	c := n.check
	c.Subnet = fmt.Sprintf("10.%d.%d.0/24", 150+int(b[0])%50, b[1])
	c.Network, c.IPAMDir = "rel-"+env.Tag, filepath.Join(n.d.Dir, "ipam")
	bridge := "cr" + env.Tag[1:]
	conf := fmt.Sprintf(`{"cniVersion": "1.0.0", "name": %q, "plugins": [
  {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "dataDir": %q, "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}`, c.Network, bridge, c.Subnet, c.IPAMDir)
	dir := filepath.Join(n.d.Dir, "cni-conf")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	env.Defer(func() { exec.Command("ip", "link", "del", bridge).Run() })
	env.Defer(n.check.RemoveCgroupParent)
	return dir, os.WriteFile(filepath.Join(dir, "10-rel.conflist"), []byte(conf), 0o644)
}

// connect makes the CRI client; its dialer waits for the socket, so that
// the first call after a restart waits for the daemon instead of failing.
func (n *criNode) connect(env *harness.Env, sock string) error {
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(harness.WaitingUnixDialer(sock)))
	if err != nil {
		return err
	}
	env.Defer(func() { conn.Close() })
	n.rt, n.img = runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn)
	n.check.RT = n.rt
	return nil
}

// restart starts the daemon (again) and waits until it serves.
func (n *criNode) restart() error {
	if err := n.d.Start(); err != nil {
		return err
	}
	n.check.DaemonPid = n.d.Pid()
	return nil
}

func (n *criNode) pull(ref string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := n.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		return fmt.Errorf("pull %s: %w", ref, err)
	}
	n.image = r.ImageRef
	return nil
}
