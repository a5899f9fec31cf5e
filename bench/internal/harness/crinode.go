package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// CRIDaemon is bin/containerd serving CRI (--cri-listen) on the private dirs
// of a Daemon, with a CNI network of its own (NewCNINet), its pods' cgroups
// under a parent named after the run's tag, and images pulled from the
// run's registry over plain http. The reliability suite's CRI node and the
// bench's cri group start it.
type CRIDaemon struct {
	*Daemon
	CRISocket string
	Root      string // --root
	Net       *CNINet
	// PodParent is the pods' cgroup parent (cgroupfs), LogDir where their
	// logs go.
	PodParent, LogDir string
	RT                runtimeapi.RuntimeServiceClient
	Img               runtimeapi.ImageServiceClient
}

// NewCRIDaemon prepares a CRI daemon named name (not started: Start); reg
// is the registry its pulls reach over plain http, extra more flags. At
// Env.Close it is destroyed with everything its pods leave when they were
// not removed: mounts under its dir, the network's bridge and iptables
// rules, the pods' cgroup parent.
func (e *Env) NewCRIDaemon(name string, reg *Registry, extra ...string) (*CRIDaemon, error) {
	d, err := e.NewDaemon(name)
	if err != nil {
		return nil, err
	}
	c := &CRIDaemon{Daemon: d, CRISocket: filepath.Join(d.Dir, "cri.sock"), Root: filepath.Join(d.Dir, "root"),
		PodParent: "/" + e.Tag + "-pods-" + name, LogDir: filepath.Join(d.Dir, "logs")}
	if c.Net, err = e.NewCNINet(d.Dir, name); err != nil {
		return nil, err
	}
	// Registered after the network's removal, so it runs before it: the
	// pods' processes and mounts go first.
	e.Defer(func() {
		d.Destroy()
		UnmountUnder(d.Dir)
		RemoveCgroupParent(c.PodParent)
	})
	d.Extra = append(d.Extra, "--cri-listen", c.CRISocket, "--root", c.Root, "--cni-conf-dir", c.Net.ConfDir,
		"--sandbox-pause", e.Bins.Pause)
	if reg != nil {
		d.Extra = append(d.Extra, "--insecure-registry", reg.Host)
	}
	d.Extra = append(d.Extra, extra...)
	conn, err := DialCRI(c.CRISocket)
	if err != nil {
		return nil, err
	}
	e.Defer(func() { conn.Close() })
	c.RT, c.Img = runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn)
	return c, nil
}

// DialCRI makes a CRI client connection to the unix socket sock; its
// dialer waits for the socket, so that the first call after a (re)start
// waits for the daemon instead of failing.
func DialCRI(sock string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)),
		grpc.WithContextDialer(WaitingUnixDialer(sock)))
}

// Pull pulls ref through the CRI and returns the image's id (ImageRef).
func Pull(img runtimeapi.ImageServiceClient, ref string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		return "", fmt.Errorf("pull %s: %w", ref, err)
	}
	return r.ImageRef, nil
}

// RemoveCgroupParent removes a pods' parent cgroup (cgroupfs path) in
// every hierarchy, deepest dirs first (runc leaves the parents it made;
// only empty cgroups can go).
func RemoveCgroupParent(parent string) {
	if parent == "" || parent == "/" {
		return
	}
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", parent))
	dirs = append(dirs, filepath.Join("/sys/fs/cgroup", parent))
	for _, d := range dirs {
		removeCgroupTree(d)
	}
}
