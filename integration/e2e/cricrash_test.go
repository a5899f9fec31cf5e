package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestCRIKilledInsideRunPodSandbox: the daemon SIGKILLed after the pause
// process started but before RunPodSandbox recorded the pod ready leaves a
// record that says not ready while the pause runs (made here from a ready
// pod: SIGKILL, then the record put back as the first write left it). After
// the restart kubelet sees a NOTREADY pod and stops and removes it: the
// pause process must be killed and nothing left, not a pod that can never
// be stopped. A container record written before its create was journaled
// (CREATED, nothing running) is removed the same way.
func TestCRIKilledInsideRunPodSandbox(t *testing.T) {
	t.Parallel()
	e := newCRIEnv(t)
	ctx := cctx(t)
	ref := e.pushTestinit(t, "e2e/crash:1")
	if _, err := e.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
		t.Fatal(err)
	}
	podCfg := e.podConfig(t, "crash")
	run, err := e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podCfg})
	if err != nil {
		t.Fatal(err)
	}
	podID := run.PodSandboxId
	cr, err := e.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: podID, SandboxConfig: podCfg,
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: ref}}})
	if err != nil {
		t.Fatal(err)
	}
	pause := initPid(t, e.d, podID)
	shim := shimOf(t, e.d, podID, "init")

	e.d.Kill()
	recPath := filepath.Join(e.d.Dir, "root", "cri", "sandboxes", podID, "sandbox.json")
	var rec map[string]any
	data, err := os.ReadFile(recPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	rec["state"] = "notready"
	delete(rec, "pid")
	if data, err = json.Marshal(rec); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(recPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	restart(t, e.d)

	ps, err := e.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: podID})
	if err != nil || ps.Status.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Fatalf("the pod after the restart: %v %v, want NOTREADY (as its record says)", ps.GetStatus().GetState(), err)
	}
	wantState(t, e, cr.ContainerId, runtimeapi.ContainerState_CONTAINER_CREATED)
	if !alive(pause) {
		t.Fatal("the pause process died with the daemon")
	}
	if _, err := e.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: podID}); err != nil {
		t.Fatalf("StopPodSandbox of a not-ready pod whose pause runs: %v", err)
	}
	waitDead(t, pause)
	waitDead(t, shim)
	removePod(t, e, podID)
}
