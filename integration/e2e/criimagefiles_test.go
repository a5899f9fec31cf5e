package e2e

import (
	"archive/tar"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evjournal/containerd/cri/crilog"
	"github.com/evjournal/containerd/integration/fixture"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// promptCreate bounds a CreateContainer that must answer at once: before,
// a FIFO /etc/passwd blocked it for ever, a device spun a CPU.
const promptCreate = 20 * time.Second

// pushEtc pushes the test init with entries added (under etc/ mostly).
func pushEtc(t *testing.T, e *criEnv, name string, entries ...fixture.Entry) string {
	t.Helper()
	ref, _ := e.reg.Push(t, name, fixture.TestinitImage(t, v1.Config{}, fixture.EntriesLayer(t, entries...)))
	pulled, err := e.img.PullImage(cctx(t), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatalf("pull %s: %v", name, err)
	}
	return pulled.ImageRef
}

// TestCRIImageFilesHostile: /etc/passwd and /etc/group are read from an
// image as the container would see them, and never hang, spin or leave the
// rootfs. A FIFO or a character device there is InvalidArgument naming
// the file, at once, leaving nothing (the image can be removed); an
// absolute symlink is followed inside the rootfs (before, such an image
// could not run at all), and one naming a host file never reads it.
func TestCRIImageFilesHostile(t *testing.T) {
	t.Parallel()
	e := newCRIEnv(t)
	ctx := cctx(t)
	host := t.TempDir()
	hostPasswd := filepath.Join(host, "passwd")
	if err := os.WriteFile(hostPasswd, []byte("intruder:x:4242:4242::/:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := pushEtc(t, e, "e2e/passwd-fifo:1", fixture.Entry{Name: "etc/passwd", Type: tar.TypeFifo})
	device := pushEtc(t, e, "e2e/group-urandom:1", fixture.Entry{Name: "etc/group", Type: tar.TypeChar, Mode: 0o666, Major: 1, Minor: 9})
	absolute := pushEtc(t, e, "e2e/passwd-symlink:1",
		fixture.Entry{Name: "usr", Type: tar.TypeDir}, fixture.Entry{Name: "usr/lib", Type: tar.TypeDir},
		fixture.Entry{Name: "usr/lib/passwd", Body: "root:x:0:0::/:/testinit\napp:x:1234:1235::/:/testinit\n"},
		fixture.Entry{Name: "etc/passwd", Type: tar.TypeSymlink, Linkname: "/usr/lib/passwd"})
	toHost := pushEtc(t, e, "e2e/passwd-to-host:1", fixture.Entry{Name: "etc/passwd", Type: tar.TypeSymlink, Linkname: hostPasswd})

	podCfg := e.podConfig(t, "etc-files")
	run, err := e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podCfg})
	if err != nil {
		t.Fatal(err)
	}
	create := func(name, image, user string) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, promptCreate)
		defer cancel()
		r, err := e.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: run.PodSandboxId, SandboxConfig: podCfg,
			Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: image},
				Command: []string{"/testinit", "status", "Uid", "Gid", "--", "sleep", "forever"}, LogPath: name + ".log",
				Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{RunAsUsername: user}}}})
		return r.GetContainerId(), err
	}
	for _, bad := range []struct{ name, image, user, want string }{
		{"fifo", fifo, "app", "/etc/passwd in the image is a named pipe (FIFO), not a regular file"},
		{"device", device, "root", "/etc/group in the image is a character device, not a regular file"},
		{"to-host", toHost, "intruder", "no matching entries in passwd file"},
	} {
		_, err := create(bad.name, bad.image, bad.user)
		wantCRICode(t, "CreateContainer of the "+bad.name+" image", err, codes.InvalidArgument)
		if !strings.Contains(err.Error(), bad.want) {
			t.Errorf("CreateContainer of the %s image: %v, want it to say %q", bad.name, err, bad.want)
		}
	}
	list, err := e.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil || len(list.Containers) != 0 {
		t.Fatalf("containers after the refusals: %v %v", list.GetContainers(), err)
	}
	if m := fixture.MountsUnder(t, filepath.Join(e.d.Dir, "root", "images")); len(m) != 0 {
		t.Fatalf("rootfs left mounted by the refusals: %v", m)
	}
	for _, img := range []string{fifo, device, toHost} {
		if _, err := e.img.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: img}}); err != nil {
			t.Errorf("RemoveImage %s after the refused creates: %v", img, err)
		}
	}

	cid, err := create("symlink", absolute, "app")
	if err != nil {
		t.Fatalf("CreateContainer of an image whose /etc/passwd is an absolute symlink: %v", err)
	}
	if _, err := e.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cid}); err != nil {
		t.Fatal(err)
	}
	recs := waitLog(t, filepath.Join(podCfg.LogDirectory, "symlink.log"), func(r []crilog.Record) bool { return len(r) >= 2 })
	if got := strings.Fields(string(recs[0].Content) + " " + string(recs[1].Content)); strings.Join(got, " ") != "Uid: 1234 1234 1234 1234 Gid: 1235 1235 1235 1235" {
		t.Fatalf("user app of the image's /usr/lib/passwd: %q, want uid 1234 gid 1235", got)
	}
	removePod(t, e, run.PodSandboxId)
}
