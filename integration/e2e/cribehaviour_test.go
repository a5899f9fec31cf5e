package e2e

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evjournal/containerd/cri/crilog"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// sysMountOptions are the options of the container's /sys mount, from its
// /proc/self/mountinfo (printed by the test init as one line of fields).
func sysMountOptions(t *testing.T, e *criEnv, cid string) string {
	t.Helper()
	ex, err := execSync(t, e, cid, "file /proc/self/mountinfo")
	if err != nil || ex.ExitCode != 0 {
		t.Fatalf("mountinfo: %v %v", ex, err)
	}
	f := strings.Fields(string(ex.Stdout))
	for i := 1; i+1 < len(f); i++ {
		if f[i-1] == "/" && f[i] == "/sys" {
			return f[i+1]
		}
	}
	t.Fatalf("no /sys mount in %s", ex.Stdout)
	return ""
}

// TestCRIBehaviourDecisions: where this daemon and containerd's CRI plugin
// could differ in what a kubelet user sees (docs/cri.md, Behaviour
// decisions), what the daemon does.
func TestCRIBehaviourDecisions(t *testing.T) {
	t.Parallel()
	e := newCRIEnv(t)
	ctx := cctx(t)
	ref := e.pushTestinit(t, "e2e/behaviour:1")

	// A privileged container of a privileged pod has /sys read-write (as
	// containerd: kube-proxy writes conntrack's hashsize there); an
	// unprivileged one read-only.
	privPod := e.podConfig(t, "privileged")
	privPod.Linux.SecurityContext = &runtimeapi.LinuxSandboxSecurityContext{Privileged: true}
	run, err := e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: privPod})
	if err != nil {
		t.Fatal(err)
	}
	pulled := imageRefOf(t, e, ref)
	priv := startSleeper(t, e, privPod, run.PodSandboxId, "priv", pulled, func(c *runtimeapi.ContainerConfig) {
		c.Linux.SecurityContext = &runtimeapi.LinuxContainerSecurityContext{Privileged: true}
	})
	plain := startSleeper(t, e, privPod, run.PodSandboxId, "plain", pulled, nil)
	if o := sysMountOptions(t, e, priv); !strings.HasPrefix(o, "rw,") {
		t.Errorf("privileged container: /sys %s, want rw", o)
	}
	if o := sysMountOptions(t, e, plain); !strings.HasPrefix(o, "ro,") {
		t.Errorf("unprivileged container of a privileged pod: /sys %s, want ro", o)
	}

	// StopContainer goes on when its caller gives up: a container that
	// ignores SIGTERM is killed once the timeout is over (containerd gives
	// up with its caller, leaving it running).
	stubborn := startSleeper(t, e, privPod, run.PodSandboxId, "stubborn", pulled, func(c *runtimeapi.ContainerConfig) {
		c.Args, c.LogPath = []string{"ignore", "TERM", "--", "echo", "ignoring", "--", "sleep", "forever"}, "stubborn.log"
	})
	// SIGTERM only once the handler is in place (its "ignoring" is logged).
	waitLog(t, filepath.Join(privPod.LogDirectory, "stubborn.log"), func(r []crilog.Record) bool { return len(r) > 0 })
	events, err := e.rt.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	stopStart := time.Now()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = e.rt.StopContainer(short, &runtimeapi.StopContainerRequest{ContainerId: stubborn, Timeout: 2})
	cancel()
	wantCRICode(t, "StopContainer whose caller gave up", err, codes.DeadlineExceeded)
	for {
		ev, err := events.Recv()
		if err != nil {
			t.Fatalf("events: %v (the stopped container's exit never came)", err)
		}
		if ev.ContainerId == stubborn && ev.ContainerEventType == runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT {
			break
		}
	}
	if cs := wantState(t, e, stubborn, runtimeapi.ContainerState_CONTAINER_EXITED); cs.ExitCode != 137 || time.Since(stopStart) < 2*time.Second {
		t.Errorf("the stopped container: exit %d after %v, want 137 after the 2 s timeout", cs.ExitCode, time.Since(stopStart))
	}

	// ExecSync whose command leaves a child holding its stdout and stderr
	// answers with the command's exit code and the output written, once
	// the drain of its output is over (containerd fails the call).
	start := time.Now()
	ex, err := execSync(t, e, plain, "echo before -- fork-inherit -- exit 3")
	if err != nil || ex.ExitCode != 3 || !strings.Contains(string(ex.Stdout), "before") || !strings.Contains(string(ex.Stdout), "child ") {
		t.Errorf("ExecSync leaving a child with its output: %v %v, want exit 3 with the output", ex, err)
	}
	t.Logf("ExecSync leaving a child holding its output answered in %v", time.Since(start))
	removePod(t, e, run.PodSandboxId)

	// A pod on the host's network whose config names a hostname runs, with
	// the host's name, which /etc/hostname says too (containerd's runc
	// refuses the pod; kubelet sends no hostname for such a pod).
	host, _ := os.Hostname()
	hostPod := e.podConfig(t, "hostnet")
	hostPod.Hostname = "own-name"
	hostPod.Linux.SecurityContext = &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE}}
	run, err = e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: hostPod})
	if err != nil {
		t.Fatalf("a host-network pod with a hostname: %v", err)
	}
	hc := startSleeper(t, e, hostPod, run.PodSandboxId, "c", pulled, nil)
	for _, f := range []string{"/etc/hostname", "/proc/sys/kernel/hostname"} {
		ex, err := execSync(t, e, hc, "file "+f)
		if want := "file " + f + ": " + host; err != nil || strings.TrimSpace(string(ex.GetStdout())) != want {
			t.Errorf("host-network pod: %q (%v), want %q", ex.GetStdout(), err, want)
		}
	}
	removePod(t, e, run.PodSandboxId)

	// A pod with a user namespace on the host's network runs, with the
	// host's /sys bound read-only (a sysfs cannot be mounted there), as
	// containerd does.
	for _, d := range []string{filepath.Dir(e.d.Dir), e.d.Dir} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	base := uint32(1<<20) + uint32(rand.IntN(1000))*65536
	m := []*runtimeapi.IDMapping{{ContainerId: 0, HostId: base, Length: 65536}}
	usernsPod := e.podConfig(t, "userns-hostnet")
	usernsPod.Hostname = ""
	usernsPod.Linux.SecurityContext = &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_NODE, UsernsOptions: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: m, Gids: m}}}
	run, err = e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: usernsPod})
	if err != nil {
		t.Fatalf("a user-namespaced pod on the host's network: %v", err)
	}
	uc := startSleeper(t, e, usernsPod, run.PodSandboxId, "c", pulled, nil)
	if o := sysMountOptions(t, e, uc); !strings.HasPrefix(o, "ro,") {
		t.Errorf("user-namespaced host-network container: /sys %s, want ro", o)
	}
	removePod(t, e, run.PodSandboxId)
}

// imageRefOf pulls ref and returns its image ref.
func imageRefOf(t *testing.T, e *criEnv, ref string) string {
	t.Helper()
	pulled, err := e.img.PullImage(cctx(t), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatal(err)
	}
	return pulled.ImageRef
}
