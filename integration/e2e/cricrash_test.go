package e2e

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestCRIJournalLost: the journal lost while the daemon is down (its dir
// emptied) and a container killed meanwhile. The objects' snapshot, beside
// the CRI records, is of the old journal: the new one is replayed on top of
// it, and the supervisor's restore finds the exit with its real status:
// EXITED 137, not the 255 of an exit found nowhere. The
// pod and the other container keep running; a second restart changes
// nothing.
func TestCRIJournalLost(t *testing.T) {
	t.Parallel()
	e := newCRIEnv(t)
	ctx := cctx(t)
	run, dies, lives := e.runDiesAndLives(t, "lost")
	pid := initPid(t, e.d, dies)
	// With the journal lost, a start is known by the marker the daemon
	// writes once it is journaled, in the container's work queue: an exec,
	// queued behind it, returns once it is written.
	for _, id := range []string{dies, lives} {
		if _, err := e.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"/testinit", "true"}}); err != nil {
			t.Fatal(err)
		}
	}

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
