package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
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

// TestCRIJournalLost: the journal lost while the daemon is down (its dir
// emptied) and a container killed meanwhile. The CRI service's cursor names
// the old journal, so it cannot replay from it; it applies what the new
// journal holds instead, where the supervisor's restore put the exit with
// its real status: EXITED 137, not the 255 of an exit found nowhere. The
// pod and the other container keep running; a second restart changes
// nothing.
func TestCRIJournalLost(t *testing.T) {
	t.Parallel()
	e := newCRIEnv(t)
	ctx := cctx(t)
	run, dies, lives := e.runDiesAndLives(t, "lost")
	pid := initPid(t, e.d, dies)

	e.d.Kill()
	kill(t, pid, syscall.SIGKILL)
	waitDead(t, pid)
	entries, err := os.ReadDir(e.d.JournalDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		if err := os.RemoveAll(filepath.Join(e.d.JournalDir, en.Name())); err != nil {
			t.Fatal(err)
		}
	}
	restart(t, e.d)

	cs := wantState(t, e, dies, runtimeapi.ContainerState_CONTAINER_EXITED)
	if cs.ExitCode != 137 {
		t.Fatalf("container killed while the daemon was down, journal lost: exit %d (%s), want its real 137", cs.ExitCode, cs.Message)
	}
	wantState(t, e, lives, runtimeapi.ContainerState_CONTAINER_RUNNING)
	ps, err := e.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: run.PodSandboxId})
	if err != nil || ps.Status.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("pod after the restart: %v %v", ps.GetStatus().GetState(), err)
	}
	e.d.Stop()
	restart(t, e.d)
	if again := wantState(t, e, dies, runtimeapi.ContainerState_CONTAINER_EXITED); again.ExitCode != 137 || again.FinishedAt != cs.FinishedAt {
		t.Fatalf("after a second restart: exit %d finished %d, was 137 at %d", again.ExitCode, again.FinishedAt, cs.FinishedAt)
	}
	wantState(t, e, lives, runtimeapi.ContainerState_CONTAINER_RUNNING)
	removePod(t, e, run.PodSandboxId)
}
