package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/evjournal/containerd/cri/crilog"
	"github.com/evjournal/containerd/integration/fixture"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestCRIUserNamespace: a pod with its own user namespace (kubelet's
// hostUsers: false). Root in the containers is the pod's mapped host uid,
// the image's root-owned files are seen as root's (an id-mapped rootfs),
// what root makes in the rootfs is stored under the mapped host ids, an
// exec joins the same namespace, ContainerStatus reports the identity, and
// mappings the runtime cannot honour are refused, leaving nothing behind.
func TestCRIUserNamespace(t *testing.T) {
	t.Parallel()
	e := newCRIEnv(t)
	ctx := cctx(t)

	st, err := e.rt.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if h := st.GetRuntimeHandlers(); len(h) != 1 || h[0].GetName() != "" || !h[0].GetFeatures().GetUserNamespaces() ||
		!h[0].GetFeatures().GetRecursiveReadOnlyMounts() || !st.GetFeatures().GetSupplementalGroupsPolicy() {
		t.Fatalf("Status: handlers %v features %v, want the default handler with user namespaces and rro", h, st.GetFeatures())
	}

	ref := e.pushTestinit(t, "e2e/userns:1")
	pulled, err := e.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatal(err)
	}
	// A host range of our own, as kubelet gives each pod one of 65536.
	uidBase := uint32(1<<20) + uint32(rand.IntN(1000))*65536
	gidBase := uidBase + 65536*1000
	mapping := func(base uint32) []*runtimeapi.IDMapping {
		return []*runtimeapi.IDMapping{{ContainerId: 0, HostId: base, Length: 65536}}
	}
	userns := &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: mapping(uidBase), Gids: mapping(gidBase)}

	podCfg := e.podConfig(t, "userns")
	podCfg.Linux.SecurityContext = &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: &runtimeapi.NamespaceOption{UsernsOptions: userns}}
	// runc's init finds the rootfs from inside the namespace, where the
	// host's root is "others": the test's private dirs above --root must
	// let others search them, and the daemon says so instead of changing
	// what is not its own.
	_, err = e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podCfg})
	wantCRICode(t, "RunPodSandbox under a 0700 dir", err, codes.FailedPrecondition)
	if !strings.Contains(err.Error(), "searchable by others, and "+e.d.Dir+" is -rwx------") {
		t.Fatalf("RunPodSandbox under a 0700 dir: %v, want it to name %s", err, e.d.Dir)
	}
	for _, d := range []string{filepath.Dir(e.d.Dir), e.d.Dir} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	run, err := e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podCfg})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	podID := run.PodSandboxId
	// A host dir bound with the pod's mappings (kubelet gives every mount
	// of such a pod its mappings): its root-owned files are root's in the
	// pod, and what root makes there is root's on the host.
	vol := t.TempDir()
	if err := os.WriteFile(filepath.Join(vol, "f"), []byte("host file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cr, err := e.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: podID, SandboxConfig: podCfg,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "c"},
			Image:    &runtimeapi.ImageSpec{Image: pulled.ImageRef},
			Command:  []string{"/testinit"},
			Args: strings.Fields("file /proc/self/uid_map -- file /proc/self/gid_map -- status Uid Gid -- owner /testinit -- " +
				"mkdir /made -- owner /made -- owner /vol/f -- mkdir /vol/sub -- sleep forever"),
			LogPath: "c.log",
			Mounts: []*runtimeapi.Mount{{ContainerPath: "/vol", HostPath: vol,
				UidMappings: mapping(uidBase), GidMappings: mapping(gidBase)}},
			Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{UsernsOptions: userns}}},
		}})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	cid := cr.ContainerId
	if _, err := e.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cid}); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	want := []string{
		fmt.Sprintf("file /proc/self/uid_map: 0 %d 65536", uidBase),
		fmt.Sprintf("file /proc/self/gid_map: 0 %d 65536", gidBase),
		"Uid: 0 0 0 0", "Gid: 0 0 0 0",
		"owner /testinit: 0:0", // the image's root-owned file is root's in the pod
		"mkdir /made: ok",      // root may write to its rootfs
		"owner /made: 0:0",
		"owner /vol/f: 0:0",  // an id-mapped volume: the host's root is the pod's
		"mkdir /vol/sub: ok", // and the pod's root may write there
	}
	recs := waitLog(t, filepath.Join(podCfg.LogDirectory, "c.log"), func(r []crilog.Record) bool { return len(r) >= len(want) })
	for i, w := range want {
		if got := strings.Join(strings.Fields(string(recs[i].Content)), " "); got != w {
			t.Fatalf("log line %d: %q, want %q (all: %v)", i, got, w, recs)
		}
	}

	// On the host, the process runs as the mapped uid and what it made is
	// owned by the mapped ids.
	pid := state(t, e.d, cid).Processes[0].SystemPid
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(status), fmt.Sprintf("\nUid:\t%d\t", uidBase)) {
		t.Fatalf("host view of the container's process %d: not uid %d:\n%s", pid, uidBase, status)
	}
	var fi syscall.Stat_t
	made := filepath.Join(e.d.Dir, "root", "images", "containers", cid, "upper", "made")
	if err := syscall.Stat(made, &fi); err != nil || fi.Uid != uidBase || fi.Gid != gidBase {
		t.Fatalf("host view of /made (%s): %d:%d %v, want %d:%d", made, fi.Uid, fi.Gid, err, uidBase, gidBase)
	}

	if err := syscall.Stat(filepath.Join(vol, "sub"), &fi); err != nil || fi.Uid != 0 || fi.Gid != 0 {
		t.Fatalf("host view of the dir the pod made in its id-mapped volume: %d:%d %v, want 0:0", fi.Uid, fi.Gid, err)
	}

	ex, err := e.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: cid, Cmd: []string{"/testinit", "file", "/proc/self/uid_map"}, Timeout: 30})
	if err != nil || ex.ExitCode != 0 || strings.Join(strings.Fields(string(ex.Stdout)), " ") != want[0] {
		t.Fatalf("ExecSync in the pod's user namespace: %v, exit %d, stdout %q stderr %q", err, ex.GetExitCode(), ex.GetStdout(), ex.GetStderr())
	}
	// A command that opens its stdout again by path (/dev/stdout, a shell's
	// "> /dev/stderr") must be allowed to: the output FIFO belongs to the
	// pod's root.
	ex, err = e.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: cid, Cmd: []string{"/testinit", "owner", "/proc/self/fd/1", "--", "stamp", "/proc/self/fd/1"}, Timeout: 30})
	if err != nil || ex.ExitCode != 0 {
		t.Fatalf("ExecSync reopening its stdout in the pod's user namespace: %v, exit %d, stdout %q stderr %q", err, ex.GetExitCode(), ex.GetStdout(), ex.GetStderr())
	}
	if lines := strings.Split(strings.TrimSpace(string(ex.Stdout)), "\n"); len(lines) != 2 || lines[0] != "owner /proc/self/fd/1: 0:0" || !strings.HasPrefix(lines[1], "STAMP ") {
		t.Fatalf("ExecSync's stdout in the pod's user namespace: %q, want it owned by the pod's root (0:0) and the stamp written through it", ex.Stdout)
	}
	u := wantState(t, e, cid, runtimeapi.ContainerState_CONTAINER_RUNNING).GetUser().GetLinux()
	if u.GetUid() != 0 || u.GetGid() != 0 {
		t.Fatalf("ContainerStatus user %v, want uid 0 gid 0 (in the pod's namespace)", u)
	}
	removePod(t, e, podID)

	// Refused: what kubelet never sends and the runtime cannot honour.
	for _, bad := range []struct {
		opts *runtimeapi.UserNamespace
		want string
	}{
		{&runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: append(mapping(uidBase), mapping(uidBase+70000)...), Gids: mapping(gidBase)},
			"userns_options.uids: 2 mappings"},
		{&runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD,
			Uids: []*runtimeapi.IDMapping{{ContainerId: 1, HostId: uidBase, Length: 10}}, Gids: mapping(gidBase)}, "container id 0 (root) must be mapped"},
		{&runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_CONTAINER}, "mode CONTAINER"},
		{&runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_TARGET}, "mode TARGET"},
	} {
		cfg := e.podConfig(t, "bad-userns")
		cfg.Linux.SecurityContext = &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: &runtimeapi.NamespaceOption{UsernsOptions: bad.opts}}
		_, err := e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
		wantCRICode(t, "RunPodSandbox "+bad.want, err, codes.InvalidArgument)
		if !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("RunPodSandbox: %v, want it to say %q", err, bad.want)
		}
	}
	list, err := e.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(list.Items) != 0 {
		t.Fatalf("pods after refused requests: %v %v", list.GetItems(), err)
	}
	if m := fixture.MountsUnder(t, e.d.Dir); len(m) != 0 {
		t.Fatalf("mounts left: %v", m)
	}
}
