package e2e

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestCRIErrorCodes: a client's mistakes are classified as kubelet
// branches on them, never Internal: an unknown id is NotFound, a call on
// an object in the wrong state FailedPrecondition, bad input
// InvalidArgument (docs/cri.md has the table; a full disk's
// ResourceExhausted is TestCRIDiskFull's).
func TestCRIErrorCodes(t *testing.T) {
	t.Parallel()
	e := newCRIEnv(t)
	ctx := cctx(t)
	podCfg, podID, running := runSleeper(t, e, "codes", e.pushTestinit(t, "e2e/codes:1"), nil)
	st, err := e.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: running})
	if err != nil {
		t.Fatal(err)
	}
	created, err := e.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: podID, SandboxConfig: podCfg,
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "created"}, Image: st.Status.Image,
			Command: []string{"/testinit", "sleep", "forever"}}})
	if err != nil {
		t.Fatal(err)
	}
	const unknown = "0123456789abcdef0123"
	for _, c := range []struct {
		what string
		call func() error
		want codes.Code
	}{
		{"ExecSync of a created container", func() error { _, err := execSync(t, e, created.ContainerId, "echo x"); return err }, codes.FailedPrecondition},
		{"ExecSync with no command", func() error {
			_, err := e.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: running})
			return err
		}, codes.InvalidArgument},
		{"StartContainer of a running container", func() error {
			_, err := e.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: running})
			return err
		}, codes.FailedPrecondition},
		{"Exec (streaming) of a created container", func() error {
			_, err := e.rt.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: created.ContainerId, Cmd: []string{"x"}, Stdout: true})
			return err
		}, codes.FailedPrecondition},
		{"Exec (streaming) of an unknown container", func() error {
			_, err := e.rt.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: unknown, Cmd: []string{"x"}, Stdout: true})
			return err
		}, codes.NotFound},
		{"Attach of an unknown container", func() error {
			_, err := e.rt.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: unknown, Stdout: true})
			return err
		}, codes.NotFound},
		{"PortForward of an unknown pod", func() error {
			_, err := e.rt.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: unknown})
			return err
		}, codes.NotFound},
		{"ContainerStats of an unknown container", func() error {
			_, err := e.rt.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: unknown})
			return err
		}, codes.NotFound},
		{"PodSandboxStats of an unknown pod", func() error {
			_, err := e.rt.PodSandboxStats(ctx, &runtimeapi.PodSandboxStatsRequest{PodSandboxId: unknown})
			return err
		}, codes.NotFound},
		{"UpdateContainerResources of an unknown container", func() error {
			_, err := e.rt.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: unknown})
			return err
		}, codes.NotFound},
		{"UpdateContainerResources of a created container", func() error {
			_, err := e.rt.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: created.ContainerId,
				Linux: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 64 << 20}})
			return err
		}, codes.FailedPrecondition},
		{"ReopenContainerLog of an unknown container", func() error {
			_, err := e.rt.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: unknown})
			return err
		}, codes.NotFound},
		{"ReopenContainerLog of a created container", func() error {
			_, err := e.rt.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: created.ContainerId})
			return err
		}, codes.FailedPrecondition},
		{"ImageStatus of a malformed name", func() error {
			_, err := e.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "Not A Name"}})
			return err
		}, codes.InvalidArgument},
	} {
		if err := c.call(); status.Code(err) != c.want {
			t.Errorf("%s: %v, want %v", c.what, err, c.want)
		}
	}
	// A pod no longer ready takes no new container and starts none.
	if _, err := e.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: podID}); err != nil {
		t.Fatal(err)
	}
	_, err = e.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: created.ContainerId})
	wantCRICode(t, "StartContainer in a stopped pod", err, codes.FailedPrecondition)
	_, err = e.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: podID, SandboxConfig: podCfg,
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "late"}, Image: st.Status.Image}})
	wantCRICode(t, "CreateContainer in a stopped pod", err, codes.FailedPrecondition)
	_, err = execSync(t, e, running, "echo x")
	wantCRICode(t, "ExecSync of a stopped container", err, codes.FailedPrecondition)
	removePod(t, e, podID)
}
