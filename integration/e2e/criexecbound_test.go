package e2e

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evjournal/containerd/integration/fixture"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// kubeletMaxMsg is the largest message kubelet's CRI client takes.
const kubeletMaxMsg = 16 << 20

// runSleeper runs a pod with one container of the test init that sleeps,
// from image (a ref pulled here); bend changes the container's config.
func runSleeper(t *testing.T, e *criEnv, name, image string, bend func(*runtimeapi.ContainerConfig)) (pod *runtimeapi.PodSandboxConfig, podID, cid string) {
	t.Helper()
	ctx := cctx(t)
	pulled, err := e.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: image}})
	if err != nil {
		t.Fatal(err)
	}
	pod = e.podConfig(t, name)
	run, err := e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: pod})
	if err != nil {
		t.Fatalf("RunPodSandbox %s: %v", name, err)
	}
	return pod, run.PodSandboxId, startSleeper(t, e, pod, run.PodSandboxId, name, pulled.ImageRef, bend)
}

// addSleeper adds a container like runSleeper's to a pod runSleeper made,
// from the same image.
func addSleeper(t *testing.T, e *criEnv, pod *runtimeapi.PodSandboxConfig, podID, name string, bend func(*runtimeapi.ContainerConfig)) string {
	t.Helper()
	cs, err := e.rt.ListContainers(cctx(t), &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: podID}})
	if err != nil || len(cs.Containers) == 0 {
		t.Fatalf("the pod's containers: %v %v", cs, err)
	}
	return startSleeper(t, e, pod, podID, name, cs.Containers[0].ImageRef, bend)
}

func startSleeper(t *testing.T, e *criEnv, pod *runtimeapi.PodSandboxConfig, podID, name, image string, bend func(*runtimeapi.ContainerConfig)) string {
	t.Helper()
	ctx := cctx(t)
	cfg := &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: image},
		Command: []string{"/testinit"}, Args: []string{"sleep", "forever"}, Linux: &runtimeapi.LinuxContainerConfig{}}
	if bend != nil {
		bend(cfg)
	}
	cr, err := e.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: podID, SandboxConfig: pod, Config: cfg})
	if err != nil {
		t.Fatalf("CreateContainer %s: %v", name, err)
	}
	if _, err := e.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cr.ContainerId}); err != nil {
		t.Fatalf("StartContainer %s: %v", name, err)
	}
	return cr.ContainerId
}

// execSync runs the test init's steps in a container as kubelet calls
// ExecSync: its client takes replies of up to 16 MiB.
func execSync(t *testing.T, e *criEnv, cid, steps string) (*runtimeapi.ExecSyncResponse, error) {
	t.Helper()
	return e.rt.ExecSync(cctx(t), &runtimeapi.ExecSyncRequest{ContainerId: cid, Cmd: append([]string{"/testinit"}, strings.Fields(steps)...), Timeout: 60},
		grpc.MaxCallRecvMsgSize(kubeletMaxMsg))
}

// TestCRIExecSyncReplyFits: a command that writes 20 MiB to stdout and 20
// MiB to stderr gets a reply kubelet can read: the two together truncated
// to just under 16 MiB, stdout first (it came first), its exit code kept.
// Before, the reply carried 16 MiB of each: 32 MiB, which kubelet's client
// refuses (the probe failed instead of reading truncated output).
func TestCRIExecSyncReplyFits(t *testing.T) {
	t.Parallel()
	e := newCRIEnv(t)
	_, podID, cid := runSleeper(t, e, "exec-fits", e.pushTestinit(t, "e2e/exec-fits:1"), nil)
	ex, err := execSync(t, e, cid, "fill 20971520 1 -- fill 20971520 2 -- exit 3")
	if err != nil {
		t.Fatalf("ExecSync of 40 MiB of output: %v, want a reply under kubelet's 16 MiB", err)
	}
	out, errOut := len(ex.Stdout), len(ex.Stderr)
	if ex.ExitCode != 3 || out+errOut > kubeletMaxMsg-1024 || out+errOut < kubeletMaxMsg-64<<10 || errOut != 0 {
		t.Fatalf("exit %d, stdout %d + stderr %d bytes: want exit 3, stdout alone filling just under 16 MiB", ex.ExitCode, out, errOut)
	}
	if bytes.Count(ex.Stdout, []byte{'x'}) != out {
		t.Fatal("stdout is not what the command wrote")
	}
	removePod(t, e, podID)
}

// TestCRIExecSyncBudget: with --exec-sync-output-budget 4MiB, four
// ExecSyncs that each wrote 4 MiB and wait together hold 4 MiB in all, not
// 16: what does not fit the daemon-wide budget is dropped from the
// replies, and every call still gets its exit code.
func TestCRIExecSyncBudget(t *testing.T) {
	t.Parallel()
	e := newCRIEnv(t, func(*criEnv) []string { return []string{"--exec-sync-output-budget", "4MiB"} })
	_, podID, cid := runSleeper(t, e, "exec-budget", e.pushTestinit(t, "e2e/exec-budget:1"), nil)
	// The calls say they wrote by making a file in /tmp/sync, seen from
	// the host in the container's upper dir; they then wait for /tmp/sync/go.
	if ex, err := execSync(t, e, cid, "mkdir /tmp/sync"); err != nil || ex.ExitCode != 0 {
		t.Fatalf("mkdir /tmp/sync: %v %v", ex, err)
	}
	watch := fixture.WatchDir(t, filepath.Join(e.d.Dir, "root", "images", "containers", cid, "upper", "tmp", "sync"))
	const calls = 4
	var wg sync.WaitGroup
	replies := make([]*runtimeapi.ExecSyncResponse, calls)
	errs := make([]error, calls)
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i], errs[i] = execSync(t, e, cid, fmt.Sprintf("fill 4194304 1 -- ready /tmp/sync/w%d -- await /tmp/sync/go", i))
		}()
	}
	for range calls {
		watch.Wait(t, 2*time.Minute, "a call's output written", func(ev fixture.DirEvent) bool { return ev.Created && strings.HasPrefix(ev.Name, "w") })
	}
	if ex, err := execSync(t, e, cid, "mkdir /tmp/sync/go"); err != nil || ex.ExitCode != 0 {
		t.Fatalf("mkdir /tmp/sync/go: %v %v", ex, err)
	}
	wg.Wait()
	kept := 0
	for i := range calls {
		if errs[i] != nil || replies[i].ExitCode != 0 {
			t.Fatalf("call %d: %v %v", i, replies[i], errs[i])
		}
		kept += len(replies[i].Stdout)
	}
	if kept > 4<<20 || kept == 0 {
		t.Fatalf("the %d calls kept %d bytes in all, want at most the 4 MiB budget (and some)", calls, kept)
	}
	removePod(t, e, podID)
}
