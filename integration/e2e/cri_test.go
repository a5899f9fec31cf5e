package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/cri/crilog"
	"github.com/evjournal/containerd/integration/fixture"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// criEnv is one test's daemon with its CRI endpoint, an image registry and
// a CNI network of its own.
type criEnv struct {
	d      *fixture.Daemon
	rt     runtimeapi.RuntimeServiceClient
	img    runtimeapi.ImageServiceClient
	reg    *fixture.Registry
	subnet string // the pods' /24
	bridge string
	logDir string
	// cniConf is the network's conflist, ipamDir host-local's dataDir.
	cniConf, ipamDir string
	sock             string // the CRI socket
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// newCRIEnv starts a daemon serving CRI with a bridge network (its own
// bridge name and /24) and an insecure registry. extra gives more daemon
// flags, knowing the registry.
func newCRIEnv(t *testing.T, extra ...func(*criEnv) []string) *criEnv {
	t.Helper()
	e := prepareCRIEnv(t, extra...)
	e.start(t)
	return e
}

// prepareCRIEnv is newCRIEnv without the daemon's start: the caller may
// change the daemon (its binary, a wrapper) and the network's conflist.
func prepareCRIEnv(t *testing.T, extra ...func(*criEnv) []string) *criEnv {
	t.Helper()
	fixture.RequireRoot(t)
	for _, p := range []string{"bridge", "host-local", "loopback", "portmap"} {
		if _, err := os.Stat(filepath.Join("/usr/lib/cni", p)); err != nil {
			t.Fatalf("CNI plugin %s: %v (install containernetworking-plugins)", p, err)
		}
	}
	e := &criEnv{reg: fixture.NewRegistry(t), logDir: t.TempDir()}
	b := make([]byte, 2)
	rand.Read(b)
	e.subnet = fmt.Sprintf("10.%d.%d.0/24", 200+int(b[0])%50, b[1])
	e.bridge = "cri" + randHex(4)
	confDir, tmp := t.TempDir(), t.TempDir()
	e.cniConf, e.ipamDir = filepath.Join(confDir, "10-test.conflist"), filepath.Join(tmp, "ipam")
	conf := fmt.Sprintf(`{"cniVersion": "1.0.0", "name": "crie2e-%s", "plugins": [
  {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "dataDir": %q, "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}`, e.bridge, e.bridge, e.subnet, e.ipamDir)
	if err := os.WriteFile(e.cniConf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	var dir string
	t.Cleanup(func() { unmountUnder(t, dir) }) // last: after the daemon is gone
	d := fixture.NewDaemon(t)
	dir = d.Dir
	e.d = d
	if fixture.OldRuntime() {
		// The CRI runs today's OCI specs: with `make test`'s second pass
		// (RUNC=runc 1.0.0-rc2, for 0.2 clients) it still uses bin/runc.
		d.Runtime = filepath.Join(fixture.RepoRoot(), "bin", "runc")
	}
	e.sock = filepath.Join(d.Dir, "cri.sock")
	var more []string
	for _, f := range extra {
		more = append(more, f(e)...)
	}
	d.Args = append(d.Args, "--cri-listen", e.sock, "--cni-conf-dir", confDir, "--insecure-registry", e.reg.Host)
	if !slices.Contains(more, "--root") {
		d.Args = append(d.Args, "--root", filepath.Join(d.Dir, "root"))
	}
	if !slices.Contains(more, "--sandbox-image") {
		d.Args = append(d.Args, "--sandbox-pause", fixture.Pause(t))
	}
	d.Args = append(d.Args, more...)
	return e
}

// start starts the daemon of a prepared env and connects to its CRI.
func (e *criEnv) start(t *testing.T) {
	t.Helper()
	d := e.d
	d.Start()
	t.Cleanup(func() {
		if strings.Contains(d.Log.String(), raceWarning) {
			t.Errorf("the daemon reported a data race:\n%s", d.Log.String())
		}
	})
	t.Cleanup(func() { deleteLink(e.bridge) })
	conn, err := grpc.NewClient("unix://"+e.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	e.rt, e.img = runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn)
	t.Cleanup(e.removeAllPods) // first: while the daemon runs, as kubelet would
}

// removeAllPods removes what a failed test left, through the CRI.
func (e *criEnv) removeAllPods() {
	if !e.d.Running() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	list, err := e.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return
	}
	for _, p := range list.Items {
		e.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.Id})
		e.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.Id})
	}
}

// unmountUnder lazily unmounts what is still mounted under dir (a daemon
// killed mid-test leaves its pods' mounts), deepest first, and says so.
func unmountUnder(t *testing.T, dir string) {
	if dir == "" {
		return
	}
	points := fixture.MountsUnder(t, dir)
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	for _, p := range points {
		unix.Unmount(p, unix.MNT_DETACH)
	}
	if len(points) > 0 && !t.Failed() {
		t.Errorf("mounts left under %s after the test: %v", dir, points)
	}
}

// deleteLink removes the bridge the plugin made (it leaves it for the next pod).
func deleteLink(name string) {
	if _, err := net.InterfaceByName(name); err == nil {
		exec.Command("ip", "link", "del", name).Run()
	}
}

// pushTestinit pushes an image of the test init to the test's registry.
func (e *criEnv) pushTestinit(t *testing.T, name string) string {
	t.Helper()
	ref, _ := e.reg.Push(t, name, fixture.TestinitImage(t, v1.Config{Cmd: []string{"sleep", "forever"}}))
	return ref
}

func (e *criEnv) podConfig(t *testing.T, name string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "e2e", Uid: randHex(8)},
		Hostname:     name,
		LogDirectory: filepath.Join(e.logDir, name),
		Linux:        &runtimeapi.LinuxPodSandboxConfig{},
	}
}

func cctx(t *testing.T) context.Context { return ctxT(t) }

// wantCRICode fails unless err is a gRPC status with code c.
func wantCRICode(t *testing.T, what string, err error, c codes.Code) {
	t.Helper()
	if status.Code(err) != c {
		t.Fatalf("%s: %v, want code %v", what, err, c)
	}
}

// TestCRIPod: through the CRI v1 API, as kubelet drives it: an image pulled
// from a registry, a pod with CNI networking, a container whose output is
// in its CRI log file, ExecSync with its output and exit codes, lifecycle
// events, stop with SIGTERM then the exit status, and removal leaving no
// mount, network namespace or shim. The containers are the supervisor's
// (visible through the 0.2 API) and their exits are journaled.
func TestCRIPod(t *testing.T) {
	t.Parallel()
	e := newCRIEnv(t)
	ctx := cctx(t)

	ver, err := e.rt.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil || ver.RuntimeApiVersion != "v1" || ver.RuntimeName == "" {
		t.Fatalf("Version: %v %v", ver, err)
	}
	rc, err := e.rt.RuntimeConfig(ctx, &runtimeapi.RuntimeConfigRequest{})
	if err != nil || rc.GetLinux().GetCgroupDriver() != runtimeapi.CgroupDriver_CGROUPFS {
		t.Fatalf("RuntimeConfig: %v %v, want the cgroupfs driver", rc, err)
	}
	st, err := e.rt.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range st.GetStatus().GetConditions() {
		if !c.Status {
			t.Fatalf("Status: condition %s false: %s %s", c.Type, c.Reason, c.Message)
		}
	}
	events, err := e.rt.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}

	ref := e.pushTestinit(t, "e2e/testinit:1")
	pulled, err := e.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatalf("PullImage %s: %v", ref, err)
	}

	podCfg := e.podConfig(t, "pod1")
	run, err := e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podCfg})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	podID := run.PodSandboxId
	ps, err := e.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: podID})
	if err != nil {
		t.Fatal(err)
	}
	if ps.Status.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("pod state %v, want READY", ps.Status.State)
	}
	_, subnet, _ := net.ParseCIDR(e.subnet)
	if ip := net.ParseIP(ps.Status.GetNetwork().GetIp()); ip == nil || !subnet.Contains(ip) {
		t.Fatalf("pod IP %q not in the network's subnet %s", ps.Status.GetNetwork().GetIp(), e.subnet)
	}

	cfg := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "c1"},
		Image:    &runtimeapi.ImageSpec{Image: pulled.ImageRef},
		Command:  []string{"/testinit"},
		Args:     []string{"echo", "hello", "--", "stderr", "oops", "--", "serve", "8080", "hi from c1", "--", "trap", "USR1", "--", "sleep", "forever"},
		LogPath:  "c1.log",
		Linux:    &runtimeapi.LinuxContainerConfig{},
	}
	cr, err := e.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: podID, Config: cfg, SandboxConfig: podCfg})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	cid := cr.ContainerId
	wantState(t, e, cid, runtimeapi.ContainerState_CONTAINER_CREATED)
	if _, err := e.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cid}); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	wantState(t, e, cid, runtimeapi.ContainerState_CONTAINER_RUNNING)

	// The supervisor runs both, labelled, as 0.2 clients see them.
	for _, id := range []string{podID, cid} {
		if c := state(t, e.d, id); c.Status != "running" {
			t.Fatalf("0.2 State of %s: %q", id, c.Status)
		}
	}

	logPath := filepath.Join(podCfg.LogDirectory, "c1.log")
	recs := waitLog(t, logPath, func(recs []crilog.Record) bool { return len(recs) >= 2 })
	got := map[string]string{}
	for _, r := range recs {
		got[r.Stream] += string(r.Content)
	}
	if got["stdout"] != "hello" || got["stderr"] != "oops" {
		t.Fatalf("CRI log %s: stdout %q stderr %q, want hello / oops (records %+v)", logPath, got["stdout"], got["stderr"], recs)
	}

	// A second container shares the pod's network namespace: it reaches the
	// first on localhost; the host reaches it on the pod's IP. It runs with
	// the RuntimeDefault seccomp profile, the first unconfined.
	cfg2 := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "c2"},
		Image:    &runtimeapi.ImageSpec{Image: ref},
		Args:     []string{"dial", "127.0.0.1:8080", "--", "sleep", "forever"},
		LogPath:  "c2.log",
		Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
			Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}},
			// As kubelet sends them: a limit for each page size the kernel has.
			Resources: &runtimeapi.LinuxContainerResources{HugepageLimits: kubeletHugepageLimits(t)}},
	}
	cr2, err := e.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: podID, Config: cfg2, SandboxConfig: podCfg})
	if err != nil {
		t.Fatalf("CreateContainer c2: %v", err)
	}
	if _, err := e.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cr2.ContainerId}); err != nil {
		t.Fatalf("StartContainer c2: %v", err)
	}
	recs2 := waitLog(t, filepath.Join(podCfg.LogDirectory, "c2.log"), func(recs []crilog.Record) bool { return len(recs) >= 1 })
	if got := string(recs2[0].Content); got != "dial 127.0.0.1:8080: hi from c1" {
		t.Fatalf("c2 dialing c1 on localhost printed %q", got)
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(ps.Status.Network.Ip, "8080"), 10*time.Second)
	if err != nil {
		t.Fatalf("dial the pod from the host: %v", err)
	}
	line := make([]byte, 64)
	n, _ := conn.Read(line)
	conn.Close()
	if string(line[:n]) != "hi from c1\n" {
		t.Fatalf("the pod answered the host %q", line[:n])
	}
	for _, tc := range []struct{ id, want string }{
		{cid, "syscall keyctl: ok\n"},
		{cr2.ContainerId, "syscall keyctl: operation not permitted\n"},
	} {
		ex, err := e.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: tc.id, Cmd: []string{"/testinit", "syscall", "keyctl"}})
		if err != nil || string(ex.Stdout) != tc.want {
			t.Fatalf("keyctl in %s: %q %v, want %q", tc.id, ex.GetStdout(), err, tc.want)
		}
	}

	ex, err := e.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: cid, Cmd: []string{"/testinit", "echo", "from exec", "--", "stderr", "err", "--", "exit", "3"}})
	if err != nil {
		t.Fatalf("ExecSync: %v", err)
	}
	if string(ex.Stdout) != "from exec\n" || string(ex.Stderr) != "err\n" || ex.ExitCode != 3 {
		t.Fatalf("ExecSync: stdout %q stderr %q exit %d, want \"from exec\\n\" \"err\\n\" 3", ex.Stdout, ex.Stderr, ex.ExitCode)
	}
	// The shim runs runc with GOMAXPROCS=1; the process gets its spec's
	// environment, not runc's.
	ex, err = e.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: cid, Cmd: []string{"/testinit", "env", "GOMAXPROCS"}})
	if err != nil || string(ex.Stdout) != "env GOMAXPROCS unset\n" {
		t.Fatalf("ExecSync env GOMAXPROCS: %q %v, want it unset in the container", ex.GetStdout(), err)
	}
	_, err = e.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: cid, Cmd: []string{"/testinit", "sleep", "forever"}, Timeout: 1})
	wantCRICode(t, "ExecSync past its timeout", err, codes.DeadlineExceeded)

	// Stats come from the container's cgroup; the pod's sum its containers.
	cst, err := e.rt.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: cid})
	if err != nil || cst.Stats.GetCpu().GetUsageCoreNanoSeconds().GetValue() == 0 || cst.Stats.GetMemory().GetUsageBytes().GetValue() == 0 {
		t.Fatalf("ContainerStats: %v %v", cst, err)
	}
	pst, err := e.rt.PodSandboxStats(ctx, &runtimeapi.PodSandboxStatsRequest{PodSandboxId: podID})
	if err != nil || len(pst.Stats.GetLinux().GetContainers()) != 2 || pst.Stats.GetLinux().GetMemory().GetUsageBytes().GetValue() < cst.Stats.Memory.UsageBytes.Value {
		t.Fatalf("PodSandboxStats: %v %v", pst, err)
	}
	// A new memory limit reaches the container's cgroup.
	limit := int64(96 << 20)
	if _, err := e.rt.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: cid,
		Linux: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: limit}}); err != nil {
		t.Fatalf("UpdateContainerResources: %v", err)
	}
	pid := initPid(t, e.d, cid)
	if got := readTrim(t, memoryCgroupFile(t, pid, "memory.limit_in_bytes")); got != fmt.Sprint(limit) {
		t.Fatalf("memory limit after UpdateContainerResources: %s, want %d", got, limit)
	}
	// Log rotation: kubelet renames the file, then asks for a reopen; later
	// output goes to a new file at the path.
	if err := os.Rename(logPath, logPath+".1"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: cid}); err != nil {
		t.Fatalf("ReopenContainerLog: %v", err)
	}
	if err := unix.Kill(pid, unix.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	rotated := waitLog(t, logPath, func(recs []crilog.Record) bool { return len(recs) >= 1 })
	if string(rotated[0].Content) != "trapped USR1" {
		t.Fatalf("the reopened log holds %+v, want the output after the reopen", rotated)
	}
	if old := waitLog(t, logPath+".1", func([]crilog.Record) bool { return true }); len(old) != 2 {
		t.Fatalf("the rotated log holds %d records, want the 2 from before", len(old))
	}

	// A container that ignores SIGTERM is killed when the timeout is up.
	c3, err := e.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: podID, SandboxConfig: podCfg,
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "stubborn"}, Image: &runtimeapi.ImageSpec{Image: ref},
			Args: []string{"ignore", "TERM", "--", "echo", "ignoring", "--", "sleep", "forever"}, LogPath: "c3.log"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c3.ContainerId}); err != nil {
		t.Fatal(err)
	}
	// PodSandboxStatus lists the pod's containers newest first: kubelet
	// with EventedPLEG takes the first of a name as its latest attempt.
	pss, err := e.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: podID})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, cs := range pss.ContainersStatuses {
		order = append(order, cs.Metadata.Name)
	}
	if strings.Join(order, " ") != "stubborn c2 c1" {
		t.Fatalf("PodSandboxStatus lists the containers %v, want the newest first (stubborn c2 c1)", order)
	}
	// SIGTERM only once the handler is in place (its "ignoring" is logged).
	waitLog(t, filepath.Join(podCfg.LogDirectory, "c3.log"), func(recs []crilog.Record) bool { return len(recs) >= 1 })
	killStart := time.Now()
	if _, err := e.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c3.ContainerId, Timeout: 1}); err != nil {
		t.Fatalf("StopContainer of a container ignoring SIGTERM: %v", err)
	}
	if cs := wantState(t, e, c3.ContainerId, runtimeapi.ContainerState_CONTAINER_EXITED); cs.ExitCode != 137 || time.Since(killStart) < time.Second {
		t.Fatalf("a container ignoring SIGTERM: exit %d after %v, want 137 (SIGKILL) after the 1 s timeout", cs.ExitCode, time.Since(killStart))
	}

	start := time.Now()
	if _, err := e.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: cid, Timeout: 10}); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	cs := wantState(t, e, cid, runtimeapi.ContainerState_CONTAINER_EXITED)
	// testinit dies of SIGTERM (no handler): 128+15, well before the 10 s.
	if cs.ExitCode != 143 || cs.Reason != "Error" || time.Since(start) > 9*time.Second || cs.FinishedAt < cs.StartedAt {
		t.Fatalf("after StopContainer: exit %d reason %q finished %d started %d (took %v)", cs.ExitCode, cs.Reason, cs.FinishedAt, cs.StartedAt, time.Since(start))
	}
	if _, err := e.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: cid}); err != nil {
		t.Fatalf("RemoveContainer: %v", err)
	}
	_, err = e.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: cid})
	wantCRICode(t, "ContainerStatus of a removed container", err, codes.NotFound)

	wantEvents := []runtimeapi.ContainerEventType{
		runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, // the pod
		runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, // the pod
		runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT,
		runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT,
		runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT,
		runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT,
	}
	for i, want := range wantEvents {
		ev, err := events.Recv()
		for err == nil && (ev.ContainerId == cr2.ContainerId || ev.ContainerId == c3.ContainerId) {
			ev, err = events.Recv() // c2's and c3's, checked by their own status
		}
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		wantID := cid
		if i < 2 {
			wantID = podID
		}
		if ev.ContainerEventType != want || ev.ContainerId != wantID {
			t.Fatalf("event %d: %v of %s, want %v of %s", i, ev.ContainerEventType, ev.ContainerId, want, wantID)
		}
	}
	// The journal has the container's whole life, as 0.2 clients see it
	// (its execs' events aside).
	var life []string
	for _, ev := range stored(t, e.d, &types.EventsRequest{Id: cid, StoredOnly: true, Timestamp: timestamppb.New(time.Unix(1, 0))}) {
		if ev.Pid == "" || ev.Pid == "init" {
			life = append(life, strings.TrimSpace(ev.Type+" "+ev.Pid))
		}
	}
	if got := strings.Join(life, ", "); got != "cri-created, start-container, exit init, cri-deleted" {
		t.Fatalf("journaled events of %s: %s", cid, got)
	}

	removePod(t, e, podID)
	var podLife []string
	for _, ev := range stored(t, e.d, &types.EventsRequest{Id: podID, StoredOnly: true, Timestamp: timestamppb.New(time.Unix(1, 0))}) {
		podLife = append(podLife, strings.TrimSpace(ev.Type+" "+ev.Pid))
	}
	if got := strings.Join(podLife, ", "); got != "cri-created, start-container, exit init, cri-deleted" {
		t.Fatalf("journaled events of the pod %s: %s", podID, got)
	}
}

// removePod stops and removes a pod and checks it left nothing: no mount,
// no network namespace under the daemon's dirs, no CRI records, no shim and
// no cgroup of its running containers or of its pause process.
func removePod(t *testing.T, e *criEnv, podID string) {
	t.Helper()
	ctx := cctx(t)
	var running []string
	if ps, err := e.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: podID}); err != nil {
		t.Fatal(err)
	} else if ps.Status.State == runtimeapi.PodSandboxState_SANDBOX_READY {
		running = append(running, podID)
	}
	cs, err := e.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: podID}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs.Containers {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			running = append(running, c.Id)
		}
	}
	var shims []int
	var cgroups []string
	for _, id := range running {
		shims = append(shims, shimOf(t, e.d, id, "init"))
		cgroups = append(cgroups, filepath.Dir(memoryCgroupFile(t, initPid(t, e.d, id), "x")))
	}
	defer func() {
		for _, pid := range shims {
			waitDead(t, pid)
		}
		for _, dir := range cgroups {
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("cgroup %s left after the pod's removal (%v)", dir, err)
			}
		}
	}()
	if _, err := e.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: podID}); err != nil {
		t.Fatalf("StopPodSandbox: %v", err)
	}
	if _, err := e.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: podID}); err != nil {
		t.Fatalf("RemovePodSandbox: %v", err)
	}
	if _, err := e.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: podID}); err != nil {
		t.Fatalf("RemovePodSandbox again (must be idempotent): %v", err)
	}
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, e.d.Dir) {
			t.Errorf("mount left after the pod's removal: %s", line)
		}
	}
	list, err := e.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || slices.ContainsFunc(list.Items, func(p *runtimeapi.PodSandbox) bool { return p.Id == podID }) {
		t.Fatalf("ListPodSandbox after removal: %v %v", list, err)
	}
}

func wantState(t *testing.T, e *criEnv, id string, want runtimeapi.ContainerState) *runtimeapi.ContainerStatus {
	t.Helper()
	r, err := e.rt.ContainerStatus(cctx(t), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		t.Fatalf("ContainerStatus %s: %v", id, err)
	}
	if r.Status.State != want {
		t.Fatalf("container %s: state %v, want %v", id, r.Status.State, want)
	}
	return r.Status
}

// waitLog reads a CRI log file until done says it holds enough: the output
// of a running container has no event to wait on.
func waitLog(t *testing.T, path string, done func([]crilog.Record) bool) []crilog.Record {
	t.Helper()
	deadline := time.Now().Add(eventWait)
	for {
		f, err := os.Open(path)
		if err == nil {
			recs, rerr := crilog.ReadAll(f)
			f.Close()
			if rerr != nil {
				t.Fatalf("CRI log %s: %v", path, rerr)
			}
			if done(recs) {
				return recs
			}
		}
		if time.Now().After(deadline) {
			data, _ := os.ReadFile(path)
			t.Fatalf("CRI log %s: not complete within %v: %q", path, eventWait, data)
		}
		time.Sleep(pollEvery)
	}
}

// runDiesAndLives pulls the test init image and runs a pod name with two
// containers of it, "dies" and "lives", both sleeping: the restart tests
// kill one behind the daemon's back and watch the other.
func (e *criEnv) runDiesAndLives(t *testing.T, name string) (run *runtimeapi.RunPodSandboxResponse, dies, lives string) {
	t.Helper()
	ctx := cctx(t)
	ref := e.pushTestinit(t, "e2e/"+name+":1")
	if _, err := e.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
		t.Fatal(err)
	}
	podCfg := e.podConfig(t, name)
	run, err := e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podCfg})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range []string{"dies", "lives"} {
		cr, err := e.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: run.PodSandboxId, SandboxConfig: podCfg,
			Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: c}, Image: &runtimeapi.ImageSpec{Image: ref}, LogPath: c + ".log"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cr.ContainerId}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, cr.ContainerId)
	}
	return run, ids[0], ids[1]
}

// TestCRIRestart: a container that dies while the daemon is down (SIGKILL
// of the daemon, then of the container's process) is EXITED with its real
// status once the daemon is back, the exit applied once (a second restart
// changes nothing), and its pod is still ready and usable.
func TestCRIRestart(t *testing.T) {
	t.Parallel()
	e := newCRIEnv(t)
	ctx := cctx(t)
	run, dies, lives := e.runDiesAndLives(t, "restart")
	pid := initPid(t, e.d, dies)
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pidfd)

	e.d.Kill()
	if err := unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0); err != nil {
		t.Fatal(err)
	}
	if n, err := unix.Poll([]unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}, int(eventWait.Milliseconds())); err != nil || n != 1 {
		t.Fatalf("the killed container process did not exit: %v", err)
	}
	restart(t, e.d)
	cs := wantState(t, e, dies, runtimeapi.ContainerState_CONTAINER_EXITED)
	if cs.ExitCode != 137 || cs.FinishedAt == 0 {
		t.Fatalf("container killed while the daemon was down: exit %d finished %d, want 137", cs.ExitCode, cs.FinishedAt)
	}
	// An event stream opened after the restart replays the last minutes
	// from the journal: the container's CREATED, STARTED and its STOPPED
	// (137), each once and in that order; the next STOPPED is the other
	// container's, after its stop below (a barrier).
	events, err := e.rt.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var seen []runtimeapi.ContainerEventType
	for {
		ev, err := events.Recv()
		if err != nil {
			t.Fatalf("events after the restart: %v (saw %v of %s)", err, seen, dies)
		}
		if ev.ContainerId != dies {
			continue
		}
		seen = append(seen, ev.ContainerEventType)
		if ev.ContainerEventType != runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT {
			continue
		}
		if len(ev.ContainersStatuses) != 1 || ev.ContainersStatuses[0].ExitCode != 137 {
			t.Fatalf("STOPPED of %s after the restart: %v, want exit 137", dies, ev)
		}
		break
	}
	if want := []runtimeapi.ContainerEventType{runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT,
		runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT}; !slices.Equal(seen, want) {
		t.Fatalf("replayed events of %s: %v, want %v", dies, seen, want)
	}
	wantState(t, e, lives, runtimeapi.ContainerState_CONTAINER_RUNNING)
	ex, err := e.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: lives, Cmd: []string{"/testinit", "echo", "still here"}})
	if err != nil || string(ex.Stdout) != "still here\n" {
		t.Fatalf("ExecSync in the live container after the restart: %q %v", ex.GetStdout(), err)
	}
	_, err = e.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: dies, Cmd: []string{"/testinit", "echo", "x"}})
	wantCRICode(t, "ExecSync in an exited container", err, codes.FailedPrecondition)
	if _, err := e.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: lives, Timeout: 10}); err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := events.Recv()
		if err != nil {
			t.Fatalf("event after the stop of %s: %v", lives, err)
		}
		if ev.ContainerId == dies {
			t.Fatalf("a second event of %s: %v (its exit must come once)", dies, ev)
		}
		if ev.ContainerId == lives && ev.ContainerEventType == runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT {
			break
		}
	}

	e.d.Stop()
	restart(t, e.d)
	again := wantState(t, e, dies, runtimeapi.ContainerState_CONTAINER_EXITED)
	if again.FinishedAt != cs.FinishedAt || again.ExitCode != 137 {
		t.Fatalf("after a second restart: finished %d exit %d, was %d 137", again.FinishedAt, again.ExitCode, cs.FinishedAt)
	}
	exits := 0
	for _, ev := range stored(t, e.d, &types.EventsRequest{Id: dies, StoredOnly: true, Timestamp: timestamppb.New(time.Unix(1, 0))}) {
		if ev.Type == "exit" {
			exits++
		}
	}
	if exits != 1 {
		t.Fatalf("the journal holds %d exits of the container killed while the daemon was down, want 1", exits)
	}
	ps, err := e.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: run.PodSandboxId})
	if err != nil || ps.Status.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("pod after the restarts: %v %v", ps.GetStatus().GetState(), err)
	}
	removePod(t, e, run.PodSandboxId)
}

// TestCRIBadInput: bad requests get the gRPC code a CRI client branches on,
// with a message naming what was wrong, and leave nothing behind.
func TestCRIBadInput(t *testing.T) {
	t.Parallel()
	e := newCRIEnv(t)
	ctx := cctx(t)
	ref := e.pushTestinit(t, "e2e/bad:1")
	if _, err := e.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
		t.Fatal(err)
	}
	_, err := e.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: e.reg.Host + "/e2e/missing:1"}})
	wantCRICode(t, "pull of a missing image", err, codes.NotFound)
	_, err = e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{}})
	wantCRICode(t, "pod without metadata", err, codes.InvalidArgument)
	_, err = e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: e.podConfig(t, "h"), RuntimeHandler: "kata"})
	wantCRICode(t, "unknown runtime handler", err, codes.NotFound)

	podCfg := e.podConfig(t, "bad")
	run, err := e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podCfg})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podCfg})
	wantCRICode(t, "a second pod with the same metadata", err, codes.AlreadyExists)

	cfg := func(name, image string, mounts ...*runtimeapi.Mount) *runtimeapi.CreateContainerRequest {
		return &runtimeapi.CreateContainerRequest{PodSandboxId: run.PodSandboxId, SandboxConfig: podCfg, Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: image}, Mounts: mounts}}
	}
	_, err = e.rt.CreateContainer(ctx, cfg("noimage", e.reg.Host+"/e2e/never-pulled:1"))
	wantCRICode(t, "a container of an image not pulled", err, codes.NotFound)
	_, err = e.rt.CreateContainer(ctx, cfg("badmount", ref, &runtimeapi.Mount{HostPath: "relative/dir", ContainerPath: "/data"}))
	wantCRICode(t, "a container with a relative mount source", err, codes.InvalidArgument)
	if !strings.Contains(err.Error(), "relative/dir") {
		t.Errorf("the bad mount's error does not name it: %v", err)
	}
	bad := cfg("x", ref)
	bad.PodSandboxId = "0123456789abcdef"
	_, err = e.rt.CreateContainer(ctx, bad)
	wantCRICode(t, "a container in an unknown pod", err, codes.NotFound)
	for what, call := range map[string]func() error{
		"ContainerStatus": func() error {
			_, err := e.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: "0123456789abcdef"})
			return err
		},
		"StartContainer": func() error {
			_, err := e.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: "0123456789abcdef"})
			return err
		},
		"ExecSync": func() error {
			_, err := e.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: "0123456789abcdef", Cmd: []string{"x"}})
			return err
		},
		"PodSandboxStatus": func() error {
			_, err := e.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: "0123456789abcdef"})
			return err
		},
	} {
		wantCRICode(t, what+" of an unknown id", call(), codes.NotFound)
	}
	if _, err := e.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: "0123456789abcdef"}); err != nil {
		t.Errorf("RemoveContainer of an unknown id: %v (removal is idempotent)", err)
	}
	if _, err := e.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: "0123456789abcdef"}); err != nil {
		t.Errorf("StopContainer of an unknown id: %v (the CRI asks for success)", err)
	}
	if _, err := e.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: "0123456789abcdef"}); err != nil {
		t.Errorf("StopPodSandbox of an unknown id: %v (the CRI asks for success)", err)
	}
	// The refusals are explained in the daemon's log.
	if lines := e.d.Log.Lines("CRI call failed"); len(lines) == 0 || !strings.Contains(strings.Join(lines, "\n"), "method=CreateContainer") {
		t.Errorf("the daemon's log has no line for the refused CreateContainer calls: %q", lines)
	}

	// Nothing of the refused creates is left: no container, no rootfs.
	list, err := e.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil || len(list.Containers) != 0 {
		t.Fatalf("containers after refused creates: %v %v", list.GetContainers(), err)
	}
	if entries, _ := os.ReadDir(filepath.Join(e.d.Dir, "root", "cri", "containers")); len(entries) != 0 {
		t.Fatalf("container dirs left by refused creates: %v", entries)
	}
	removePod(t, e, run.PodSandboxId)
	_, err = e.rt.CreateContainer(ctx, cfg("late", ref))
	wantCRICode(t, "a container in a removed pod", err, codes.NotFound)
}

// kubeletHugepageLimits are the limits kubelet puts in every container's
// resources: 0 for each page size under /sys/kernel/mm/hugepages.
func kubeletHugepageLimits(t *testing.T) []*runtimeapi.HugepageLimit {
	entries, _ := os.ReadDir("/sys/kernel/mm/hugepages")
	var out []*runtimeapi.HugepageLimit
	for _, e := range entries {
		kb, ok := strings.CutPrefix(e.Name(), "hugepages-")
		kb, ok2 := strings.CutSuffix(kb, "kB")
		n, err := strconv.Atoi(kb)
		if !ok || !ok2 || err != nil {
			continue
		}
		size := fmt.Sprintf("%dKB", n)
		switch {
		case n%(1<<20) == 0:
			size = fmt.Sprintf("%dGB", n>>20)
		case n%(1<<10) == 0:
			size = fmt.Sprintf("%dMB", n>>10)
		}
		out = append(out, &runtimeapi.HugepageLimit{PageSize: size, Limit: 0})
	}
	return out
}
