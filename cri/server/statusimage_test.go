package server

import (
	"context"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestStatusImageIsTheUsersName: a container kubelet creates from the
// image's id, with the name the pod gave as user_specified_image, reports
// that name as its image in ContainerStatus and ListContainers (kubelet
// puts it in the pod's status); ImageRef stays the resolved reference.
// Without user_specified_image the spec is reported as given.
func TestStatusImageIsTheUsersName(t *testing.T) {
	e := newEnv(t)
	e.start()
	pod := e.runPod("img")
	cfg := ctrConfig("by-id")
	cfg.Image = &runtimeapi.ImageSpec{Image: testImageID, UserSpecifiedImage: testImage,
		Annotations: map[string]string{"a": "b"}}
	r, err := e.srv.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: cfg, SandboxConfig: podConfig("img")})
	if err != nil {
		t.Fatal(err)
	}
	st := e.ctrStatus(r.ContainerId)
	if st.Image.GetImage() != testImage || st.Image.GetUserSpecifiedImage() != testImage || st.Image.GetAnnotations()["a"] != "b" {
		t.Errorf("status image %v, want %s (the annotations kept)", st.Image, testImage)
	}
	if st.ImageRef == "" || st.ImageRef == testImage {
		t.Errorf("status image ref %q, want the resolved reference", st.ImageRef)
	}
	l, err := e.srv.ListContainers(context.Background(), &runtimeapi.ListContainersRequest{
		Filter: &runtimeapi.ContainerFilter{Id: r.ContainerId}})
	if err != nil || len(l.Containers) != 1 || l.Containers[0].Image.GetImage() != testImage {
		t.Errorf("listed %v, %v; want one container of image %s", l.GetContainers(), err, testImage)
	}

	plain := e.runCtr(pod, "by-name")
	if got := e.ctrStatus(plain).Image.GetImage(); got != testImage {
		t.Errorf("status image %q of a container created by name, want %q", got, testImage)
	}
	if got := statusImage(&runtimeapi.ImageSpec{Image: testImageID}).GetImage(); got != testImageID {
		t.Errorf("no user_specified_image: %q, want the spec %q", got, testImageID)
	}
}
