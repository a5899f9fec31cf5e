package reliability

import (
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/evjournal/containerd/bench/internal/harness"
	"github.com/evjournal/containerd/integration/fixture"
)

// criNode is a daemon of the suite serving CRI (harness.CRIDaemon: a CNI
// network of its own, a bridge with masquerading and host ports, so that a
// pod makes iptables rules), an image of the test init in a registry of
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
	c, err := env.NewCRIDaemon(name, reg)
	if err != nil {
		return nil, err
	}
	n := &criNode{d: c.Daemon, rt: c.RT, img: c.Img, podParent: c.PodParent, logDir: c.LogDir}
	n.check = &fixture.CRINode{RT: c.RT, Runc: env.Bins.Runc, RuncRoot: c.RuncRoot, Dir: c.Dir, StateDir: c.StateDir,
		Root: c.Root, CgroupParent: c.PodParent, Network: c.Net.Name, Subnet: c.Net.Subnet, IPAMDir: c.Net.IPAMDir}
	if err := n.restart(); err != nil {
		return nil, err
	}
	n.image, err = harness.Pull(n.img, ref)
	return n, err
}

// restart starts the daemon (again) and waits until it serves.
func (n *criNode) restart() error {
	if err := n.d.Start(); err != nil {
		return err
	}
	n.check.DaemonPid = n.d.Pid()
	return nil
}
