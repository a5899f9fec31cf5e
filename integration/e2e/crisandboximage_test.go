package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evjournal/containerd/cri/crilog"
	"github.com/evjournal/containerd/integration/fixture"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestCRISandboxImage: with --sandbox-image the pods' sandboxes run that
// image (pulled by the first RunPodSandbox, not before), which is reported
// pinned and cannot be removed while a pod uses it; containers join the
// sandbox as with the pause binary; removal leaves nothing.
func TestCRISandboxImage(t *testing.T) {
	t.Parallel()
	var sandboxRef string
	e := newCRIEnv(t, func(e *criEnv) []string {
		sandboxRef = e.pushTestinit(t, "e2e/sandbox:1") // sleep forever
		return []string{"--sandbox-image", sandboxRef}
	})
	ctx := cctx(t)
	if st, err := e.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: sandboxRef}}); err != nil || st.Image != nil {
		t.Fatalf("the sandbox image before the first pod: %v %v, want not pulled yet", st.GetImage(), err)
	}

	podCfg := e.podConfig(t, "sbimage")
	run, err := e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podCfg})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	podID := run.PodSandboxId
	if got := cmdline(initPid(t, e.d, podID)); got != "/testinit sleep forever" {
		t.Fatalf("the sandbox runs %q, want the sandbox image's entrypoint and cmd", got)
	}
	st, err := e.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: sandboxRef}})
	if err != nil || st.Image == nil || !st.Image.Pinned {
		t.Fatalf("the sandbox image after the first pod: %v %v, want pulled and pinned", st.GetImage(), err)
	}
	_, err = e.img.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: sandboxRef}})
	wantCRICode(t, "RemoveImage of the sandbox image while a pod runs it", err, codes.FailedPrecondition)

	// Another image (its config differs, so does its id).
	appRef, _ := e.reg.Push(t, "e2e/app:1", fixture.TestinitImage(t, v1.Config{Cmd: []string{"sleep", "forever"}, Env: []string{"APP=1"}}))
	pulled, err := e.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: appRef}})
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := e.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: appRef}}); st.GetImage().GetPinned() {
		t.Fatal("an application image is reported pinned")
	}
	cr, err := e.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: podID, SandboxConfig: podCfg,
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Image: &runtimeapi.ImageSpec{Image: pulled.ImageRef},
			Args: []string{"file", "/etc/hostname", "--", "sleep", "forever"}, LogPath: "app.log"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cr.ContainerId}); err != nil {
		t.Fatal(err)
	}
	recs := waitLog(t, podCfg.LogDirectory+"/app.log", func(r []crilog.Record) bool { return len(r) >= 1 })
	if got := strings.TrimSpace(string(recs[0].Content)); got != "file /etc/hostname: sbimage" {
		t.Fatalf("the container reads %q, want the pod's hostname", got)
	}
	removePod(t, e, podID)

	// A pod with a user namespace runs the image too: the rootfs's upper
	// dir is its root's, so runc can make the mountpoints the image lacks.
	for _, d := range []string{filepath.Dir(e.d.Dir), e.d.Dir} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	m := []*runtimeapi.IDMapping{{ContainerId: 0, HostId: 1 << 21, Length: 65536}}
	usernsCfg := e.podConfig(t, "sbimage-userns")
	usernsCfg.Linux.SecurityContext = &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: &runtimeapi.NamespaceOption{
		UsernsOptions: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: m, Gids: m}}}
	run, err = e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: usernsCfg})
	if err != nil {
		t.Fatalf("RunPodSandbox with a user namespace: %v", err)
	}
	if got := cmdline(initPid(t, e.d, run.PodSandboxId)); got != "/testinit sleep forever" {
		t.Fatalf("the user-namespaced sandbox runs %q", got)
	}
	removePod(t, e, run.PodSandboxId)
	if _, err := e.img.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: sandboxRef}}); err != nil {
		t.Fatalf("RemoveImage of the sandbox image once no pod uses it: %v", err)
	}
}
