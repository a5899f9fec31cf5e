package e2e

import (
	"archive/tar"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/evjournal/containerd/cri/crilog"
	"github.com/evjournal/containerd/integration/fixture"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/moby/sys/mountinfo"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// nobody is the unprivileged host user the tests act as (setuid in the
// child), in no group of a pod.
const nobody = 65534

// asNobody runs a program as the unprivileged host user.
func asNobody(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// hostileDevicesImage is the test init with what an attacker's image ships:
// a device node anyone may open (/dev/null's numbers: harmless to open, and
// only its opening is asked) and a set-uid root copy of the test init.
func hostileDevicesImage(t *testing.T, e *criEnv) string {
	t.Helper()
	body, err := os.ReadFile(fixture.Testinit(t))
	if err != nil {
		t.Fatal(err)
	}
	layer := fixture.EntriesLayer(t,
		fixture.Entry{Name: "hostile", Type: tar.TypeDir},
		fixture.Entry{Name: "hostile/null", Type: tar.TypeChar, Mode: 0o666, Major: 1, Minor: 3},
		fixture.Entry{Name: "hostile/setuid", Body: string(body), Mode: 0o4755},
	)
	ref, _ := e.reg.Push(t, "e2e/hostile-devices:1", fixture.TestinitImage(t, v1.Config{Cmd: []string{"sleep", "forever"}}, layer))
	pulled, err := e.img.PullImage(cctx(t), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatal(err)
	}
	return pulled.ImageRef
}

// TestCRIUserNSNothingReachable: a user-namespaced pod (hostUsers: false)
// opens nothing of its image to other host users (CVE-2021-41103's
// class). Its own dirs on the way to its rootfs are 0710, group the pod's
// host root gid; the daemon's dirs above are 0711 and stay so; the overlay
// is nodev. An unprivileged host user can neither open the image's 0666
// device node nor run its set-uid file, and root cannot open the device
// either; inside the pod the set-uid file still works (the overlay is not
// nosuid).
func TestCRIUserNSNothingReachable(t *testing.T) {
	t.Parallel()
	e := newCRIEnv(t)
	ctx := cctx(t)
	for _, d := range []string{filepath.Dir(e.d.Dir), e.d.Dir} {
		if err := os.Chmod(d, 0o711); err != nil { // the test's own dirs: only the daemon's are checked
			t.Fatal(err)
		}
	}
	img := hostileDevicesImage(t, e)
	uidBase := uint32(1<<20) + uint32(rand.IntN(1000))*65536
	gidBase := uidBase + 65536*1000
	mapping := func(base uint32) []*runtimeapi.IDMapping {
		return []*runtimeapi.IDMapping{{ContainerId: 0, HostId: base, Length: 65536}}
	}
	userns := &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: mapping(uidBase), Gids: mapping(gidBase)}
	podCfg := e.podConfig(t, "userns-host")
	podCfg.Linux.SecurityContext = &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: &runtimeapi.NamespaceOption{UsernsOptions: userns}}
	run, err := e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podCfg})
	if err != nil {
		t.Fatal(err)
	}
	cfg := func(name string, uid int64, args string) *runtimeapi.ContainerConfig {
		return &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: img},
			Command: []string{"/testinit"}, Args: strings.Fields(args), LogPath: name + ".log",
			Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				RunAsUser: &runtimeapi.Int64Value{Value: uid}, NamespaceOptions: &runtimeapi.NamespaceOption{UsernsOptions: userns}}}}
	}
	// Inside, uid 1000 runs the set-uid root file as root of the pod.
	ids := map[string]string{}
	for name, c := range map[string]*runtimeapi.ContainerConfig{
		"c": cfg("c", 0, "sleep forever"), "setuid": cfg("setuid", 1000, "status Uid -- exec /hostile/setuid status Uid -- sleep forever"),
	} {
		cr, err := e.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: run.PodSandboxId, SandboxConfig: podCfg, Config: c})
		if err != nil {
			t.Fatalf("CreateContainer %s: %v", name, err)
		}
		if _, err := e.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cr.ContainerId}); err != nil {
			t.Fatalf("StartContainer %s: %v", name, err)
		}
		ids[name] = cr.ContainerId
	}
	// The init execs /hostile/setuid, which prints its own status: the
	// real uid 1000 and the effective 0 of the set-uid file.
	recs := waitLog(t, filepath.Join(podCfg.LogDirectory, "setuid.log"), func(r []crilog.Record) bool { return len(r) >= 2 })
	if got := strings.Join(strings.Fields(string(recs[1].Content)), " "); got != "Uid: 1000 0 0 0" {
		t.Fatalf("the set-uid file run by uid 1000 in the pod: %q, want %q", got, "Uid: 1000 0 0 0")
	}

	root := filepath.Join(e.d.Dir, "root")
	cid := ids["c"]
	rootfs := filepath.Join(root, "images", "containers", cid, "rootfs")
	wantDirModes(t, root, run.PodSandboxId, cid, int(gidBase))
	wantNodev(t, rootfs)
	wantUnusable(t, rootfs, uidBase)

	removePod(t, e, run.PodSandboxId)
	for _, d := range []string{root, filepath.Join(root, "images"), filepath.Join(root, "images", "containers"), filepath.Join(root, "cri"), filepath.Join(root, "cri", "sandboxes")} {
		wantHostMode(t, d, 0o711, 0)
	}
}

// wantHostMode fails unless path has this mode and group.
func wantHostMode(t *testing.T, path string, mode os.FileMode, gid int) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if got := os.FileMode(st.Mode).Perm(); got != mode || int(st.Gid) != gid || st.Uid != 0 {
		t.Errorf("%s: mode %v owner %d:%d, want %v 0:%d", path, got, st.Uid, st.Gid, mode, gid)
	}
}

// wantDirModes: the daemon's dirs above a pod are 0711; the pod's and its
// container's own dirs 0710 with the pod's root gid.
func wantDirModes(t *testing.T, root, podID, cid string, gid int) {
	t.Helper()
	for _, d := range []string{root, filepath.Join(root, "images"), filepath.Join(root, "images", "containers"), filepath.Join(root, "cri"), filepath.Join(root, "cri", "sandboxes")} {
		wantHostMode(t, d, 0o711, 0)
	}
	for _, d := range []string{filepath.Join(root, "images", "containers", cid), filepath.Join(root, "cri", "sandboxes", podID), filepath.Join(root, "cri", "sandboxes", podID, "bundle")} {
		wantHostMode(t, d, 0o710, gid)
	}
}

// wantNodev: the container's overlay is mounted nodev (and not nosuid).
func wantNodev(t *testing.T, rootfs string) {
	t.Helper()
	ms, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(rootfs))
	if err != nil || len(ms) != 1 {
		t.Fatalf("the rootfs mount at %s: %v %v", rootfs, ms, err)
	}
	if opts := "," + ms[0].Options + ","; !strings.Contains(opts, ",nodev,") || strings.Contains(opts, ",nosuid,") {
		t.Errorf("rootfs %s mounted %q, want nodev and not nosuid", rootfs, ms[0].Options)
	}
}

// wantUnusable: from the host, the image's device node cannot be opened
// (by nobody, nor by root) and its set-uid file gives nobody no other
// identity.
func wantUnusable(t *testing.T, rootfs string, podUID uint32) {
	t.Helper()
	dev, setuid := filepath.Join(rootfs, "hostile", "null"), filepath.Join(rootfs, "hostile", "setuid")
	if f, err := os.OpenFile(dev, os.O_RDWR, 0); err == nil {
		f.Close()
		t.Errorf("root opened the image's device node %s from the host", dev)
	} else if !errors.Is(err, syscall.EACCES) {
		t.Errorf("root's open of the image's device node: %v, want permission denied (nodev)", err)
	}
	if out, err := asNobody(fixture.Testinit(t), "file", dev); err == nil {
		t.Errorf("uid %d opened the image's device node %s: %q", nobody, dev, out)
	}
	out, err := asNobody(setuid, "status", "Uid")
	switch {
	case err == nil && strings.Join(strings.Fields(out), " ") != fmt.Sprintf("Uid: %d %d %d %d", nobody, nobody, nobody, nobody):
		t.Errorf("uid %d ran the image's set-uid file and became %q (the pod's root is %d)", nobody, out, podUID)
	case err == nil:
	case !errors.Is(err, syscall.EACCES):
		t.Errorf("uid %d running the image's set-uid file: %v %q, want permission denied", nobody, err, out)
	}
}
