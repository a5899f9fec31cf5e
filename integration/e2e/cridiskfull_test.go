package e2e

import (
	"bytes"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/integration/fixture"
)

// TestCRINodeDiskFull: --root, --journal-dir and the pods' log dir on one
// small file system, filled by a container's logging, as a node's /var
// fills. The journal cannot write (the 0.2 API refuses creates and execs,
// Unavailable naming ENOSPC), and still kubelet keeps the node: ExecSync
// and Exec work, a container killed by pid shows EXITED, StopContainer and
// StopPodSandbox kill and return within their timeouts, RemoveContainer and
// RemovePodSandbox succeed and free the rootfs and upper dirs (and leave no
// shim, cgroup or mount); CreateContainer and RunPodSandbox are refused
// saying why, leaving nothing. Once the logs are removed (kubelet's job) a
// new pod runs without a restart, and the journal, read through the 0.2
// API, holds each object's durable events (cri-created, start-container,
// exit, cri-deleted) once each, in order.
//
// The old design failed it at the first step: the degraded journal refused
// the CRI's Note and Exec, so ExecSync, Exec, CreateContainer,
// RemoveContainer and RemovePodSandbox all failed, and exits were held
// from the CRI's follower, so Stop timed out.
func TestCRINodeDiskFull(t *testing.T) {
	t.Parallel()
	disk := fixture.SmallTmpfs(t, "48m")
	root, logs := filepath.Join(disk, "root"), filepath.Join(disk, "logs")
	e := prepareCRIEnv(t, func(*criEnv) []string { return []string{"--root", root} })
	e.d.JournalDir = filepath.Join(disk, "journal")
	e.logDir = logs
	e.start(t)
	ctx := cctx(t)
	node := criNode(t, e, root)

	ref := e.pushTestinit(t, "e2e/nodefull:1")
	if _, err := e.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
		t.Fatal(err)
	}
	podCfg := e.podConfig(t, "nodefull")
	run, err := e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podCfg})
	if err != nil {
		t.Fatal(err)
	}
	pod := run.PodSandboxId
	startIn := func(name string, args []string, res *runtimeapi.LinuxContainerResources) string {
		t.Helper()
		cr, err := e.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: pod, SandboxConfig: podCfg,
			Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: ref},
				Args: args, LogPath: name + ".log", Linux: &runtimeapi.LinuxContainerConfig{Resources: res}}})
		if err != nil {
			t.Fatalf("CreateContainer %s: %v", name, err)
		}
		if _, err := e.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cr.ContainerId}); err != nil {
			t.Fatalf("StartContainer %s: %v", name, err)
		}
		return cr.ContainerId
	}
	lives := startIn("lives", nil, nil)
	killed := startIn("killed", nil, nil)
	// A 0.2 container (its state dir is elsewhere) to probe the journal.
	probe := fixture.UniqueID(t)
	create(t, e.d, probe, fixture.NewBundle(t, fixture.Args("sleep", "forever")))

	// The writer logs until the file system is full, and on (its shim
	// drops what it cannot write): whatever a removal frees, it takes.
	// A fifth of a CPU, so as not to starve the rest.
	writer := startIn("writer", []string{"flood"}, &runtimeapi.LinuxContainerResources{CpuPeriod: 100000, CpuQuota: 20000})
	waitFull(t, disk)

	// The journal's next commit fails; the 0.2 API then refuses what would
	// add events.
	var refused error
	for i := 0; refused == nil && i < 200; i++ {
		_, refused = e.d.Client.AddProcess(ctx, execReq(probe, "p"+randHex(4), "exit", "0"))
	}
	wantDegraded := func(what string, err error) {
		t.Helper()
		if st, _ := status.FromError(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "ENOSPC") {
			t.Fatalf("%s while the journal cannot write: %v, want Unavailable naming ENOSPC", what, err)
		}
	}
	wantDegraded("a 0.2 exec", refused)
	_, err = e.d.Client.CreateContainer(ctx, &types.CreateContainerRequest{Id: probe + "-2",
		BundlePath: fixture.NewBundle(t, fixture.Args("sleep", "forever")).Path})
	wantDegraded("a 0.2 create", err)
	if !strings.Contains(err.Error(), e.d.JournalDir) {
		t.Fatalf("a 0.2 create while the journal cannot write: %v, want it to name %s", err, e.d.JournalDir)
	}

	// CreateContainer and RunPodSandbox are refused saying why, and leave
	// nothing.
	mountsBefore := fixture.MountsUnder(t, root)
	netnsBefore, _ := os.ReadDir(filepath.Join(e.d.StateDir, ".cri", "netns"))
	_, err = e.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: pod, SandboxConfig: podCfg,
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "refused"}, Image: &runtimeapi.ImageSpec{Image: ref}}})
	wantNoSpace(t, "CreateContainer", err)
	_, err = e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: e.podConfig(t, "nodefull-refused")})
	wantNoSpace(t, "RunPodSandbox", err)
	if got := fixture.MountsUnder(t, root); !slices.Equal(got, mountsBefore) {
		t.Fatalf("mounts under --root after the refusals: %v, before %v", got, mountsBefore)
	}
	if netnsAfter, _ := os.ReadDir(filepath.Join(e.d.StateDir, ".cri", "netns")); len(netnsAfter) != len(netnsBefore) {
		t.Fatalf("network namespaces after the refused pod: %d, before %d", len(netnsAfter), len(netnsBefore))
	}
	for dir, want := range map[string]int{"containers": 3, "sandboxes": 1} {
		if entries, _ := os.ReadDir(filepath.Join(root, "cri", dir)); len(entries) != want {
			t.Fatalf("%s records after the refusals: %d, want %d", dir, len(entries), want)
		}
	}

	// Probes and kubectl exec work: neither is journaled.
	ex, err := e.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: lives, Cmd: []string{"/testinit", "echo", "probe ok", "--", "exit", "3"}, Timeout: 10})
	if err != nil || string(ex.Stdout) != "probe ok\n" || ex.ExitCode != 3 {
		t.Fatalf("ExecSync on a full disk: %q exit %d, %v", ex.GetStdout(), ex.GetExitCode(), err)
	}
	if out, code, err := criExec(t, e, lives, "/testinit", "echo", "exec ok", "--", "exit", "5"); err != nil || out != "exec ok\n" || code != 5 {
		t.Fatalf("Exec on a full disk: %q exit %d, %v", out, code, err)
	}

	// A container killed behind the daemon's back: its exit is held (the
	// journal cannot write) and shows at once. No event can say so (events
	// are published once journaled): ContainerStatus is polled.
	kill(t, initPid(t, e.d, killed), syscall.SIGKILL)
	waitExited(t, e, killed, 137)
	stopStart := time.Now()
	if _, err := e.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: lives, Timeout: 10}); err != nil {
		t.Fatalf("StopContainer on a full disk: %v", err)
	}
	if cs := wantState(t, e, lives, runtimeapi.ContainerState_CONTAINER_EXITED); cs.ExitCode != 143 || time.Since(stopStart) > 9*time.Second {
		t.Fatalf("StopContainer on a full disk: exit %d after %v, want 143 within the 10 s timeout", cs.ExitCode, time.Since(stopStart))
	}
	// Both exits are held, not journaled: what the CRI showed came from the
	// loop's objects.
	for _, id := range []string{lives, killed} {
		for _, ev := range stored(t, e.d, &types.EventsRequest{Id: id, Timestamp: timestamppb.New(time.Unix(1, 0))}) {
			if ev.Type == "exit" {
				t.Fatalf("the exit of %s is in the journal already: the disk was to be full", id)
			}
		}
	}
	for _, id := range []string{lives, killed} {
		if _, err := e.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
			t.Fatalf("RemoveContainer on a full disk: %v", err)
		}
		wantFreed(t, root, id)
	}

	// StopPodSandbox kills the writer and the pause, promptly.
	shims := []int{shimOf(t, e.d, writer, "init"), shimOf(t, e.d, pod, "init")}
	cgroups := []string{filepath.Dir(memoryCgroupFile(t, initPid(t, e.d, writer), "x")), filepath.Dir(memoryCgroupFile(t, initPid(t, e.d, pod), "x"))}
	stopStart = time.Now()
	if _, err := e.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: pod}); err != nil {
		t.Fatalf("StopPodSandbox on a full disk: %v", err)
	}
	if took := time.Since(stopStart); took > promptly {
		t.Fatalf("StopPodSandbox on a full disk took %v", took)
	}
	if cs := wantState(t, e, writer, runtimeapi.ContainerState_CONTAINER_EXITED); cs.ExitCode != 137 {
		t.Fatalf("the writer after StopPodSandbox: exit %d, want 137", cs.ExitCode)
	}
	ps, err := e.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: pod})
	if err != nil || ps.Status.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Fatalf("the pod after StopPodSandbox: %v %v, want NOTREADY", ps.GetStatus().GetState(), err)
	}
	for _, pid := range shims {
		waitDead(t, pid)
	}
	removePod(t, e, pod)
	wantFreed(t, root, writer)
	signal(t, e.d, probe, "init", syscall.SIGKILL)

	// Space comes back: kubelet removes the logs of the removed pod. The
	// journal takes what it held (the last of it is the 0.2 container's
	// exit) without a restart, and new pods start.
	all := e.d.SubscribeAfter(time.Unix(1, 0), probe)
	if err := os.RemoveAll(podCfg.LogDirectory); err != nil {
		t.Fatal(err)
	}
	for ev := all.Next(eventWait); ev.Type != "exit" || ev.Pid != "init"; ev = all.Next(eventWait) {
	}
	all.Close()
	podCfg = e.podConfig(t, "nodefull-after")
	run2, err := e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podCfg})
	if err != nil {
		t.Fatalf("RunPodSandbox once the logs are removed: %v", err)
	}
	pod = run2.PodSandboxId
	after := startIn("after", nil, nil)
	removePod(t, e, pod)
	if bad := fixture.WaitChecked(ctx, promptly, node.CheckEmpty); len(bad) > 0 {
		t.Fatalf("left after every pod's removal: %s", strings.Join(bad, "; "))
	}
	// The runc delete after an exit waits for the exit to be journaled:
	// the cgroups of the pod stopped on the full disk go with it.
	for _, dir := range cgroups {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s left after the pod's removal (%v)", dir, err)
		}
	}

	// The journal has every durable event once, in order.
	evs := stored(t, e.d, &types.EventsRequest{Timestamp: timestamppb.New(time.Unix(1, 0))})
	life := map[string][]string{}
	for i, ev := range evs {
		if i > 0 && ev.Seq <= evs[i-1].Seq {
			t.Fatalf("journal: seq %d after %d", ev.Seq, evs[i-1].Seq)
		}
		if ev.Pid == "" || ev.Pid == "init" {
			life[ev.Id] = append(life[ev.Id], strings.TrimSpace(ev.Type+" "+ev.Pid))
		}
	}
	want := "cri-created, start-container, exit init, cri-deleted"
	for _, id := range []string{run.PodSandboxId, lives, killed, writer, run2.PodSandboxId, after} {
		if got := strings.Join(life[id], ", "); got != want {
			t.Errorf("journaled life of %s: %s, want %s", id, got, want)
		}
	}
	if got := strings.Join(life[probe], ", "); got != "start-container, exit init" {
		t.Errorf("journaled life of the 0.2 container %s: %s", probe, got)
	}
}

// waitFull waits until dir's file system has no block left. Nothing tells
// when a container's output has filled it: this polls.
func waitFull(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(eventWait)
	for {
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		if st.Bavail == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not full after %v: %d blocks free", dir, eventWait, st.Bavail)
		}
		time.Sleep(pollEvery)
	}
}

// wantNoSpace checks that a CRI create refused on a full disk says why:
// the file system's ENOSPC (ResourceExhausted) or the journal's
// (Unavailable).
func wantNoSpace(t *testing.T, what string, err error) {
	t.Helper()
	st, _ := status.FromError(err)
	switch {
	case st.Code() == codes.ResourceExhausted && strings.Contains(st.Message(), "no space left on device"):
	case st.Code() == codes.Unavailable && strings.Contains(st.Message(), "ENOSPC"):
	default:
		t.Fatalf("%s on a full disk: %v, want ResourceExhausted or Unavailable saying no space is left", what, err)
	}
}

// waitExited polls ContainerStatus until id is EXITED with code.
func waitExited(t *testing.T, e *criEnv, id string, code int32) {
	t.Helper()
	deadline := time.Now().Add(promptly)
	for {
		r, err := e.rt.ContainerStatus(cctx(t), &runtimeapi.ContainerStatusRequest{ContainerId: id})
		if err != nil {
			t.Fatalf("ContainerStatus %s: %v", id, err)
		}
		if r.Status.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			if r.Status.ExitCode != code {
				t.Fatalf("container %s exited %d, want %d", id, r.Status.ExitCode, code)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s: %v %v after it was killed, want EXITED", id, r.Status.State, promptly)
		}
		time.Sleep(pollEvery)
	}
}

// wantFreed checks that a removed container left nothing under --root: no
// rootfs (mount, upper and work dir) and no dir of its own.
func wantFreed(t *testing.T, root, id string) {
	t.Helper()
	for _, dir := range []string{filepath.Join(root, "images", "containers", id), filepath.Join(root, "cri", "containers", id)} {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left after the container's removal (%v)", dir, err)
		}
	}
	for _, m := range fixture.MountsUnder(t, root) {
		if strings.Contains(m, id) {
			t.Errorf("mount %s left after the container's removal", m)
		}
	}
}

// criExec runs cmd in container id through the CRI's Exec and the
// streaming server, as kubectl exec does: its stdout and exit code.
func criExec(t *testing.T, e *criEnv, id string, cmd ...string) (string, int, error) {
	t.Helper()
	resp, err := e.rt.Exec(cctx(t), &runtimeapi.ExecRequest{ContainerId: id, Cmd: cmd, Stdout: true, Stderr: true})
	if err != nil {
		return "", 0, err
	}
	u, err := url.Parse(resp.Url)
	if err != nil {
		return "", 0, err
	}
	exe, err := remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", u)
	if err != nil {
		return "", 0, err
	}
	var stdout, stderr bytes.Buffer
	err = exe.StreamWithContext(cctx(t), remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
	var exit utilexec.CodeExitError
	if errors.As(err, &exit) {
		return stdout.String(), exit.Code, nil
	}
	if err != nil {
		return stdout.String(), 0, errors.Join(err, errors.New(stderr.String()))
	}
	return stdout.String(), 0, nil
}

// criNode is the fixture's view of e's daemon, for its invariant checks,
// root its --root.
func criNode(t *testing.T, e *criEnv, root string) *fixture.CRINode {
	runc := fixture.Runc(t)
	if fixture.OldRuntime() { // the CRI's runc (prepareCRIEnv)
		runc = filepath.Join(fixture.RepoRoot(), "bin", "runc")
	}
	return &fixture.CRINode{RT: e.rt, Runc: runc, RuncRoot: e.d.RuncRoot, Dir: e.d.Dir, DaemonPid: e.d.Pid(), StateDir: e.d.StateDir,
		Root: root, IPAMDir: e.ipamDir, Network: "crie2e-" + e.bridge, Subnet: e.subnet}
}
