package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evjournal/containerd/integration/fixture"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestCRIDiskFull: with --root on a file system that is full, CreateContainer
// and RunPodSandbox are refused with ResourceExhausted naming the cause, and
// leave nothing behind (no record, no rootfs mount, no network namespace,
// nothing listed); the pod that ran before keeps running; once space is
// freed both work again, with no restart of the daemon.
func TestCRIDiskFull(t *testing.T) {
	t.Parallel()
	root := fixture.SmallTmpfs(t, "64m")
	e := newCRIEnv(t, func(*criEnv) []string { return []string{"--root", root} })
	ctx := cctx(t)
	ref := e.pushTestinit(t, "e2e/full:1")
	pulled, err := e.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatal(err)
	}
	podCfg := e.podConfig(t, "full")
	run, err := e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podCfg})
	if err != nil {
		t.Fatal(err)
	}
	ctrCfg := &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Image: &runtimeapi.ImageSpec{Image: pulled.ImageRef}, Args: []string{"sleep", "forever"}}
	mountsBefore := fixture.MountsUnder(t, root)
	netnsDir := filepath.Join(e.d.StateDir, ".cri", "netns")
	netnsBefore, _ := os.ReadDir(netnsDir)

	filler := fixture.FillFS(t, root)
	full := func(what string, err error) {
		t.Helper()
		wantCRICode(t, what+" on a full disk", err, codes.ResourceExhausted)
		if !strings.Contains(err.Error(), "no space left on device") {
			t.Fatalf("%s on a full disk: %v, want it to say why", what, err)
		}
	}
	_, err = e.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: run.PodSandboxId, SandboxConfig: podCfg, Config: ctrCfg})
	full("CreateContainer", err)
	_, err = e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: e.podConfig(t, "full2")})
	full("RunPodSandbox", err)

	cs, err := e.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil || len(cs.Containers) != 0 {
		t.Fatalf("containers after the refused create: %v %v", cs.GetContainers(), err)
	}
	ps, err := e.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(ps.Items) != 1 || ps.Items[0].State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("pods after the refused run: %v %v, want the first one only, ready", ps.GetItems(), err)
	}
	if got := fixture.MountsUnder(t, root); strings.Join(got, " ") != strings.Join(mountsBefore, " ") {
		t.Fatalf("mounts under --root after the refusals: %v, before %v", got, mountsBefore)
	}
	if netnsAfter, _ := os.ReadDir(netnsDir); len(netnsAfter) != len(netnsBefore) {
		t.Fatalf("network namespaces after the refused run: %d, before %d", len(netnsAfter), len(netnsBefore))
	}
	for _, d := range []string{"containers", "sandboxes"} {
		entries, _ := os.ReadDir(filepath.Join(root, "cri", d))
		if d == "sandboxes" && len(entries) != 1 || d == "containers" && len(entries) != 0 {
			t.Fatalf("%s records after the refusals: %d", d, len(entries))
		}
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	cr, err := e.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: run.PodSandboxId, SandboxConfig: podCfg, Config: ctrCfg})
	if err != nil {
		t.Fatalf("CreateContainer once space is back: %v", err)
	}
	if _, err := e.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cr.ContainerId}); err != nil {
		t.Fatalf("StartContainer once space is back: %v", err)
	}
	run2, err := e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: e.podConfig(t, "full2")})
	if err != nil {
		t.Fatalf("RunPodSandbox once space is back: %v", err)
	}
	// The second pod goes first, plainly: removePod's checks look at
	// every mount under the daemon's dirs.
	if _, err := e.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: run2.PodSandboxId}); err != nil {
		t.Fatal(err)
	}
	removePod(t, e, run.PodSandboxId)
	if m := fixture.MountsUnder(t, root); len(m) != 0 {
		t.Fatalf("mounts left under --root: %v", m)
	}
}
