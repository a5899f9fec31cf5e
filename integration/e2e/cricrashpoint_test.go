//go:build failpoints

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/internal/crashpoint"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The crash points of the CRI's calls (internal/crashpoint, docs/cri.md
// "Crash points"): for each, the call runs on a daemon built with the
// failpoints tag and armed there, the daemon dies at that step (SIGKILL,
// nothing flushed), and once restarted without it:
//
//   - the invariants hold (fixture.CRINode.Check): whatever runc runs for
//     the daemon is a pod or container the CRI lists as running, and what
//     it lists as running runs;
//   - the CRI shows what the step had made durable, and nothing else;
//   - kubelet's way of going on (retry the call; a pod that is not ready
//     is stopped, removed and made again; a created container started)
//     reaches what the call was for, and the invariants hold again;
//   - once every pod is removed, nothing is left: no process, mount,
//     netns pin, /dev/shm, IP lease, iptables rule, cgroup, rootfs, CNI
//     cache entry, record (fixture.CRINode.CheckEmpty).

// call is the CRI call a case crashes in.
type call int

const (
	callRunPod call = iota
	callCreate
	callStart
	callStop
	callRemove
	callStopPod
	callRemovePod
)

// crashCase is one crash point, the call that reaches it, and what the CRI
// must list after the restart ("" for no pod or no container).
type crashCase struct {
	point   string
	call    call
	pod     string // PodSandboxState without its prefix: READY, NOTREADY
	ctr     string // ContainerState without its prefix: CREATED, RUNNING, EXITED
	exitSet []int32
	// slowCreate: runc create takes a second more, so that the restart
	// finds the shim still inside it (the restore abandons that create
	// while the shim goes on with it).
	slowCreate bool
	// slowPortmap: portmap's ADD starts 2 s late, so that it would still
	// run after the restart's DEL if it outlived the daemon.
	slowPortmap bool
}

var crashCases = []crashCase{
	{point: "run-pod:after-reserve", call: callRunPod},
	{point: "run-pod:after-record", call: callRunPod},
	{point: "run-pod:after-netns", call: callRunPod},
	// Inside the ADD: after loopback's, bridge's, portmap's (not cached yet).
	{point: "run-pod:cni-plugin-running#3", call: callRunPod, slowPortmap: true}, // portmap's, killed with the daemon
	{point: "run-pod:after-cni-plugin#2", call: callRunPod},
	{point: "run-pod:after-cni-plugin#3", call: callRunPod},
	{point: "run-pod:after-cni-add", call: callRunPod},
	{point: "run-pod:after-shm", call: callRunPod},
	{point: "run-pod:after-bundle", call: callRunPod},
	{point: "run-pod:after-prepare", call: callRunPod},
	{point: "run-pod:after-commit", call: callRunPod, pod: "NOTREADY"},
	{point: "loop-start:after-shim-spawn#1", call: callRunPod, pod: "NOTREADY"}, // the pause's start
	{point: "loop-start:after-runc-start#1", call: callRunPod, pod: "NOTREADY"},
	{point: "loop-start:after-journal#1", call: callRunPod, pod: "READY"},
	{point: "run-pod:after-start", call: callRunPod, pod: "READY"},

	{point: "create:after-reserve", call: callCreate, pod: "READY"},
	{point: "create:after-dir", call: callCreate, pod: "READY"},
	{point: "create:after-rootfs", call: callCreate, pod: "READY"},
	{point: "create:after-bundle", call: callCreate, pod: "READY"},
	{point: "create:after-record", call: callCreate, pod: "READY"},
	{point: "create:after-commit", call: callCreate, pod: "READY", ctr: "CREATED"},

	{point: "start:after-stdio", call: callStart, pod: "READY", ctr: "CREATED"},
	{point: "loop-start:after-shim-spawn#2", call: callStart, pod: "READY", ctr: "CREATED"}, // the pause's start was #1
	{point: "loop-start:after-shim-spawn#2", call: callStart, pod: "READY", ctr: "CREATED", slowCreate: true},
	{point: "loop-start:after-runc-start#2", call: callStart, pod: "READY", ctr: "CREATED"},
	{point: "loop-start:after-journal#2", call: callStart, pod: "READY", ctr: "RUNNING"},
	{point: "start:after-start", call: callStart, pod: "READY", ctr: "RUNNING"},

	// SIGTERM: the test init, pid 1 of its namespace, exits 2 or dies of it.
	{point: "stop:after-signal", call: callStop, pod: "READY", ctr: "EXITED", exitSet: []int32{2, 143}},

	{point: "remove:after-begin", call: callRemove, pod: "READY", ctr: "EXITED", exitSet: []int32{137}},
	{point: "remove:after-rootfs", call: callRemove, pod: "READY", ctr: "EXITED", exitSet: []int32{137}},
	{point: "remove:after-dir", call: callRemove, pod: "READY"},

	{point: "stop-pod:after-containers", call: callStopPod, pod: "READY", ctr: "EXITED", exitSet: []int32{137}},
	{point: "stop-pod:after-pause", call: callStopPod, pod: "NOTREADY", ctr: "EXITED", exitSet: []int32{137}},
	// The DEL of portmap (#1), then of bridge (#2), which goes on without the daemon.
	{point: "network-down:cni-plugin-running#2", call: callStopPod, pod: "NOTREADY", ctr: "EXITED", exitSet: []int32{137}},
	{point: "network-down:after-cni-del", call: callStopPod, pod: "NOTREADY", ctr: "EXITED", exitSet: []int32{137}},

	{point: "remove-pod:after-containers", call: callRemovePod, pod: "READY"},
	{point: "remove-pod:after-stop", call: callRemovePod, pod: "NOTREADY"},
	{point: "remove-pod:after-dir", call: callRemovePod},
}

// TestCRICrashPoints runs every case of crashCases on a daemon of its own.
func TestCRICrashPoints(t *testing.T) {
	for _, tc := range crashCases {
		name := strings.NewReplacer(":", "_", "#", "_").Replace(tc.point)
		if tc.slowCreate {
			name += "_slow-create"
		}
		if tc.slowPortmap {
			name += "_slow-portmap"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			k := newCrashKubelet(t, tc)
			k.upTo(t, tc.call)
			k.crash(t, tc)
			k.wantListed(t, tc)
			k.goOn(t, tc.call)
			k.removeAll(t)
		})
	}
}

// TestCRICrashPointsAllTested: every crash point in the daemon's code has
// its case above, so that a point added without a test fails here.
func TestCRICrashPointsAllTested(t *testing.T) {
	at := regexp.MustCompile(`crashpoint\.At\("([^"]+)"\)`)
	var inCode []string
	for _, dir := range []string{"cri/server", "supervisor", "podnet", "runtime"} {
		files, err := filepath.Glob(filepath.Join(fixture.RepoRoot(), dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range at.FindAllStringSubmatch(string(data), -1) {
				inCode = append(inCode, m[1])
			}
		}
	}
	if len(inCode) < 20 {
		t.Fatalf("found only %d crash points in the code: %v", len(inCode), inCode)
	}
	for _, p := range inCode {
		if !slices.ContainsFunc(crashCases, func(c crashCase) bool { return strings.Split(c.point, "#")[0] == p }) {
			t.Errorf("crash point %q has no case in crashCases", p)
		}
	}
}

// crashKubelet drives one pod as kubelet would, on a daemon armed with a
// crash point for its first run.
type crashKubelet struct {
	e            *criEnv
	node         *fixture.CRINode
	image        string
	uid          string // the pod's: kubelet finds its sandboxes by it
	cgroupParent string
	hostPort     int32
	podID, ctrID string
}

func newCrashKubelet(t *testing.T, tc crashCase) *crashKubelet {
	e := prepareCRIEnv(t)
	e.d.Binary = fixture.ContainerdFailpoints(t, raceEnabled)
	e.d.Wrap = []string{"env", crashpoint.Env + "=" + tc.point}
	if tc.slowPortmap {
		e.d.Args = append(e.d.Args, "--cni-bin-dir", slowPortmapDir(t), "--cni-bin-dir", "/usr/lib/cni")
	}
	masq(t, e)
	k := &crashKubelet{e: e, uid: randHex(8), cgroupParent: "/crie2e-" + randHex(4), hostPort: int32(20000 + randInt(30000))}
	runc := e.d.Runtime
	if runc == "" {
		runc = fixture.Runc(t)
	}
	if tc.slowCreate {
		e.d.Runtime = slowCreateRuntime(t, runc)
	}
	k.node = &fixture.CRINode{Runc: runc, RuncRoot: e.d.RuncRoot, Dir: e.d.Dir, StateDir: e.d.StateDir,
		Root: filepath.Join(e.d.Dir, "root"), IPAMDir: e.ipamDir, Network: "crie2e-" + e.bridge, Subnet: e.subnet, CgroupParent: k.cgroupParent}
	t.Cleanup(k.node.RemoveCgroupParent) // after the pods' removal (cleanups run last first)
	e.start(t)
	k.node.RT, k.node.DaemonPid = e.rt, e.d.Pid()
	ctx := cctx(t)
	k.image = e.pushTestinit(t, "e2e/crash:1")
	if _, err := e.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: k.image}}); err != nil {
		t.Fatal(err)
	}
	return k
}

// slowCreateRuntime is runc whose create starts a second late.
func slowCreateRuntime(t *testing.T, runc string) string {
	// Named runc, as the daemon then knows where its --root is.
	path := filepath.Join(t.TempDir(), "runc")
	script := fmt.Sprintf(`#!/bin/sh
case " $* " in *" --help "*) exec %[1]s "$@" ;; esac # a probe of create's flags, not a create
case " $* " in *" create "*) sleep 1 ;; esac
exec %[1]s "$@"
`, runc)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// slowPortmapDir holds a portmap plugin whose ADD starts 2 s late; the
// other plugins are found after it, in /usr/lib/cni.
func slowPortmapDir(t *testing.T) string {
	dir := t.TempDir()
	script := "#!/bin/sh\n[ \"$CNI_COMMAND\" = ADD ] && sleep 2\nexec /usr/lib/cni/portmap \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "portmap"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// masq turns the bridge's masquerading on: its iptables rules are among
// what a pod must not leave.
func masq(t *testing.T, e *criEnv) {
	conf, err := os.ReadFile(e.cniConf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.cniConf, []byte(strings.Replace(string(conf), `"ipMasq": false`, `"ipMasq": true`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func randInt(n int) int {
	var v int
	fmt.Sscanf(randHex(4), "%x", &v)
	return v % n
}

func (k *crashKubelet) podConfig(attempt uint32) *runtimeapi.PodSandboxConfig {
	cfg := k.e.podConfig(nil, "crash")
	cfg.Metadata.Uid, cfg.Metadata.Attempt = k.uid, attempt
	cfg.Linux.CgroupParent = k.cgroupParent
	cfg.PortMappings = []*runtimeapi.PortMapping{{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 8080, HostPort: k.hostPort}}
	return cfg
}

func (k *crashKubelet) containerConfig(attempt uint32) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "app", Attempt: attempt},
		Image: &runtimeapi.ImageSpec{Image: k.image}, LogPath: fmt.Sprintf("app_%d.log", attempt)}
}

// upTo makes what the crashing call needs: a ready pod for CreateContainer,
// a created container for StartContainer, a running one for the rest.
func (k *crashKubelet) upTo(t *testing.T, c call) {
	t.Helper()
	ctx := cctx(t)
	if c == callRunPod {
		return
	}
	run, err := k.e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: k.podConfig(0)})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	k.podID = run.PodSandboxId
	if c == callCreate {
		return
	}
	cr, err := k.e.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: k.podID, Config: k.containerConfig(0), SandboxConfig: k.podConfig(0)})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	k.ctrID = cr.ContainerId
	if c == callStart {
		return
	}
	if _, err := k.e.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: k.ctrID}); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
}

// crash makes the call, which must fail with the daemon dead at the point,
// then starts the daemon again, unarmed, and checks the invariants.
func (k *crashKubelet) crash(t *testing.T, tc crashCase) {
	t.Helper()
	if bad := k.node.Check(cctx(t)); len(bad) > 0 {
		t.Fatalf("before the crash: %s", strings.Join(bad, "\n"))
	}
	if err := k.do(cctx(t), tc.call); err == nil {
		t.Fatalf("the call crashing at %s succeeded", tc.point)
	}
	select {
	case <-k.e.d.Exited():
	case <-cctx(t).Done():
		t.Fatalf("the daemon did not die at %s", tc.point)
	}
	if want := "crashpoint: " + strings.Split(tc.point, "#")[0] + " reached"; !strings.Contains(k.e.d.Log.String(), want) {
		t.Fatalf("the daemon died, but not at %s (no %q in its log)", tc.point, want)
	}
	k.e.d.Wrap = nil
	restart(t, k.e.d)
	k.node.DaemonPid = k.e.d.Pid()
	k.check(t, "after the restart")
}

// do is the crashing call, on the ids upTo made.
func (k *crashKubelet) do(ctx context.Context, c call) error {
	rt := k.e.rt
	var err error
	switch c {
	case callRunPod:
		_, err = rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: k.podConfig(0)})
	case callCreate:
		_, err = rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: k.podID, Config: k.containerConfig(0), SandboxConfig: k.podConfig(0)})
	case callStart:
		_, err = rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: k.ctrID})
	case callStop:
		_, err = rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: k.ctrID, Timeout: 10})
	case callRemove:
		_, err = rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: k.ctrID})
	case callStopPod:
		_, err = rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: k.podID})
	case callRemovePod:
		_, err = rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: k.podID})
	}
	return err
}

func (k *crashKubelet) check(t *testing.T, when string) {
	t.Helper()
	if bad := fixture.WaitChecked(cctx(t), promptly, k.node.Check); len(bad) > 0 {
		t.Fatalf("%s, the invariants do not hold:\n%s", when, strings.Join(bad, "\n"))
	}
}

// wantListed checks that the CRI lists what the steps before the crash made
// durable: the pod and its container in the case's states, or none.
func (k *crashKubelet) wantListed(t *testing.T, tc crashCase) {
	t.Helper()
	ctx := cctx(t)
	pods, err := k.e.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range pods.Items {
		got = append(got, strings.TrimPrefix(p.State.String(), "SANDBOX_"))
	}
	if want := nonEmpty(tc.pod); !slices.Equal(got, want) {
		t.Fatalf("after a crash at %s: pods %v, want %v", tc.point, got, want)
	}
	ctrs, err := k.e.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, c := range ctrs.Containers {
		got = append(got, strings.TrimPrefix(c.State.String(), "CONTAINER_"))
		if c.State == runtimeapi.ContainerState_CONTAINER_EXITED && tc.exitSet != nil {
			st := wantState(t, k.e, c.Id, runtimeapi.ContainerState_CONTAINER_EXITED)
			if !slices.Contains(tc.exitSet, st.ExitCode) {
				t.Fatalf("after a crash at %s: exit code %d (%s), want one of %v", tc.point, st.ExitCode, st.Message, tc.exitSet)
			}
		}
	}
	if want := nonEmpty(tc.ctr); !slices.Equal(got, want) {
		t.Fatalf("after a crash at %s: containers %v, want %v", tc.point, got, want)
	}
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// goOn is kubelet after the restart: it retries what the call was for
// until it is done, and the invariants hold again.
func (k *crashKubelet) goOn(t *testing.T, c call) {
	t.Helper()
	ctx := cctx(t)
	kl := fixture.Kubelet{RT: k.e.rt}
	var err error
	switch c {
	case callRunPod, callCreate, callStart:
		err = k.ensureRunning(ctx, kl)
	case callStop:
		_, err = k.e.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: k.ctrID, Timeout: 10})
		if err == nil {
			wantState(t, k.e, k.ctrID, runtimeapi.ContainerState_CONTAINER_EXITED)
		}
	case callRemove:
		_, err = k.e.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: k.ctrID})
		if err == nil {
			k.wantGone(t, k.ctrID)
		}
	case callStopPod:
		_, err = k.e.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: k.podID})
		if err == nil {
			k.wantStopped(t)
		}
	case callRemovePod:
		_, err = k.e.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: k.podID})
		if err == nil {
			k.wantGone(t, k.podID)
		}
	}
	if err != nil {
		t.Fatalf("kubelet's retry after the restart: %v", err)
	}
	k.check(t, "after kubelet's retry")
}

// ensureRunning: the pod ready with an IP and its container running,
// whatever the crash left.
func (k *crashKubelet) ensureRunning(ctx context.Context, kl fixture.Kubelet) error {
	podID, err := kl.EnsurePod(ctx, k.uid, k.podConfig)
	if err != nil {
		return err
	}
	ps, err := k.e.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: podID})
	if err != nil {
		return err
	}
	if ps.Status.State != runtimeapi.PodSandboxState_SANDBOX_READY || ps.Status.GetNetwork().GetIp() == "" {
		return fmt.Errorf("pod %s after EnsurePod: %v, IP %q", podID, ps.Status.State, ps.Status.GetNetwork().GetIp())
	}
	ctrID, err := kl.EnsureRunning(ctx, podID, k.podConfig(ps.Status.Metadata.GetAttempt()), "app", k.containerConfig)
	if err != nil {
		return err
	}
	k.podID, k.ctrID = podID, ctrID
	cs, err := k.e.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: ctrID})
	if err != nil {
		return err
	}
	if cs.Status.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return fmt.Errorf("container %s after EnsureRunning: %v", ctrID, cs.Status.State)
	}
	return nil
}

// wantGone: id is listed neither as a pod nor as a container.
func (k *crashKubelet) wantGone(t *testing.T, id string) {
	t.Helper()
	ctx := cctx(t)
	pods, err := k.e.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{Id: id}})
	if err != nil || len(pods.Items) > 0 {
		t.Fatalf("%s listed after its removal: %v %v", id, pods, err)
	}
	ctrs, err := k.e.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{Id: id}})
	if err != nil || len(ctrs.Containers) > 0 {
		t.Fatalf("%s listed after its removal: %v %v", id, ctrs, err)
	}
}

// wantStopped: the pod is not ready, its containers exited, its network
// gone (netns pin, IP lease, iptables rules).
func (k *crashKubelet) wantStopped(t *testing.T) {
	t.Helper()
	ps, err := k.e.rt.PodSandboxStatus(cctx(t), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: k.podID})
	if err != nil {
		t.Fatal(err)
	}
	if ps.Status.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Fatalf("pod %s after StopPodSandbox: %v", k.podID, ps.Status.State)
	}
	for _, c := range ps.ContainersStatuses {
		if c.State != runtimeapi.ContainerState_CONTAINER_EXITED {
			t.Fatalf("container %s of the stopped pod: %v", c.Id, c.State)
		}
	}
	if bad := k.node.CheckNetworkDown(); len(bad) > 0 {
		t.Fatalf("the stopped pod's network is not down:\n%s", strings.Join(bad, "\n"))
	}
}

// removeAll removes every pod as kubelet does, and checks nothing is left.
func (k *crashKubelet) removeAll(t *testing.T) {
	t.Helper()
	if err := (fixture.Kubelet{RT: k.e.rt}).RemoveAll(cctx(t)); err != nil {
		t.Fatalf("removing every pod: %v", err)
	}
	if bad := fixture.WaitChecked(cctx(t), promptly, k.node.CheckEmpty); len(bad) > 0 {
		t.Fatalf("after every pod's removal, left:\n%s", strings.Join(bad, "\n"))
	}
}
