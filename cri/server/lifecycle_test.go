package server

import (
	"context"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestPodLifecycle: a pod and a container through their whole life, on
// the fakes; removing the pod leaves nothing.
func TestPodLifecycle(t *testing.T) {
	e := newEnv(t)
	pod := e.runPod("web")
	if got := e.podState(pod); got != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("pod %v, want READY", got)
	}
	c := e.runCtr(pod, "app")
	if st := e.ctrStatus(c); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("container %v, want RUNNING", st.State)
	}
	if _, err := e.srv.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: pod}); err != nil {
		t.Fatal(err)
	}
	if st := e.ctrStatus(c); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 137 {
		t.Fatalf("container %v %d after the pod's stop, want EXITED 137", st.State, st.ExitCode)
	}
	if err := e.removePod(pod); err != nil {
		t.Fatal(err)
	}
	e.checkNothingLeft()
}
