package ocispec

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/evjournal/containerd/integration/fixture"
)

// TestRuncPod runs a generated sandbox (the test init sleeping, as the
// pause process) and a generated container joining it through the real
// runc, with RuntimeDefault seccomp on both: the container's keyctl and
// personality(ADDR_NO_RANDOMIZE) are denied, the same container with
// Unconfined may make them, and the process has the uid, gids (its user's
// by name from the rootfs's /etc/group, and the supplemental one) and
// capabilities its config asked for, in the sandbox's pid namespace.
func TestRuncPod(t *testing.T) {
	fixture.RequireRoot(t)
	runc, testinit := fixture.Runc(t), fixture.Testinit(t)
	parent := "ocispec-" + fixture.UniqueID(t)
	t.Cleanup(func() { removeCgroupDirs(t, parent) }) // after the containers' deletion, registered below
	root := fixture.RuncRoot(t)

	sbID := "sb-" + fixture.UniqueID(t)
	sbCfg := &runtime.PodSandboxConfig{
		Metadata: &runtime.PodSandboxMetadata{Name: "pod", Namespace: "default", Uid: "u1"},
		Hostname: "pod",
		Linux: &runtime.LinuxPodSandboxConfig{
			CgroupParent: "/" + parent,
			SecurityContext: &runtime.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtime.NamespaceOption{Network: runtime.NamespaceMode_NODE},
				Seccomp:          &runtime.SecurityProfile{ProfileType: runtime.SecurityProfile_RuntimeDefault},
			},
		},
	}
	sbDir := bundleDir(t, testinit, false)
	sbSpec, err := Sandbox(sbCfg, SandboxParams{ID: sbID, PauseArgs: []string{"/testinit", "sleep", "forever"},
		RootfsPath: filepath.Join(sbDir, "rootfs")})
	if err != nil {
		t.Fatal(err)
	}
	writeSpec(t, sbDir, sbSpec)
	runcDetached(t, runc, root, sbDir, sbID)
	var state struct{ Pid int }
	if err := json.Unmarshal(runcCmd(t, runc, root, "state", sbID), &state); err != nil || state.Pid == 0 {
		t.Fatalf("runc state %s: pid %d, %v", sbID, state.Pid, err)
	}

	run := func(profile runtime.SecurityProfile_ProfileType) string {
		id := "c-" + fixture.UniqueID(t)
		dir := bundleDir(t, testinit, true)
		cfg := &runtime.ContainerConfig{
			Metadata: &runtime.ContainerMetadata{Name: "app"},
			Command:  []string{"/testinit"},
			Args: strings.Fields("pid -- syscall keyctl -- syscall personality -- " +
				"status Uid Gid Groups CapEff CapAmb CapBnd NoNewPrivs Seccomp"),
			Linux: &runtime.LinuxContainerConfig{SecurityContext: &runtime.LinuxContainerSecurityContext{
				RunAsUsername:      "app",
				SupplementalGroups: []int64{4000},
				Capabilities: &runtime.Capability{DropCapabilities: []string{"ALL"},
					AddCapabilities: []string{"CHOWN", "NET_BIND_SERVICE"}, AddAmbientCapabilities: []string{"NET_BIND_SERVICE"}},
				NoNewPrivs:       true,
				ReadonlyRootfs:   true,
				NamespaceOptions: &runtime.NamespaceOption{Network: runtime.NamespaceMode_NODE, Pid: runtime.NamespaceMode_POD},
				Seccomp:          &runtime.SecurityProfile{ProfileType: profile},
			}},
		}
		spec, err := Container(cfg, sbCfg, ImageConfig{}, ContainerParams{ID: id, SandboxID: sbID,
			RootfsPath: filepath.Join(dir, "rootfs"), SandboxPid: state.Pid})
		if err != nil {
			t.Fatal(err)
		}
		writeSpec(t, dir, spec)
		return string(runcCmd(t, runc, root, "run", "--bundle", dir, id))
	}

	confined := run(runtime.SecurityProfile_RuntimeDefault)
	for _, want := range []string{
		"syscall keyctl: operation not permitted",
		"syscall personality: operation not permitted",
		"Uid: 1000 1000 1000 1000",
		"Gid: 1000 1000 1000 1000",
		"Groups: 1000 3000 4000", // the primary group, the image's, the config's
		// A non-root process keeps across execve only its ambient
		// capabilities: CAP_NET_BIND_SERVICE (10); CAP_CHOWN (0) is in its
		// bounding set only.
		"CapEff: 0000000000000400",
		"CapAmb: 0000000000000400",
		"CapBnd: 0000000000000401",
		"NoNewPrivs: 1",
		"Seccomp: 2",
	} {
		if !strings.Contains(confined, want+"\n") {
			t.Errorf("RuntimeDefault: no %q in the output:\n%s", want, confined)
		}
	}
	if strings.Contains(confined, "pid 1\n") {
		t.Errorf("the container is pid 1: it did not join the sandbox's pid namespace:\n%s", confined)
	}
	unconfined := run(runtime.SecurityProfile_Unconfined)
	for _, want := range []string{"syscall keyctl: ok", "syscall personality: ok", "Seccomp: 0"} {
		if !strings.Contains(unconfined, want+"\n") {
			t.Errorf("Unconfined: no %q in the output:\n%s", want, unconfined)
		}
	}
	runcCmd(t, runc, root, "delete", "--force", sbID)
}

// bundleDir makes a bundle dir whose rootfs holds the test init, the
// mount points, and with users an /etc/passwd and /etc/group where "app"
// is 1000:1000 and a member of group 3000.
func bundleDir(t *testing.T, testinit string, users bool) string {
	t.Helper()
	dir := t.TempDir()
	if err := fixture.MakeRootfs(dir, testinit); err != nil {
		t.Fatal(err)
	}
	if users {
		etc := filepath.Join(dir, "rootfs", "etc")
		write(t, filepath.Join(etc, "passwd"), "root:x:0:0::/:/testinit\napp:x:1000:1000::/:/testinit\n")
		write(t, filepath.Join(etc, "group"), "root:x:0:\napp:x:1000:\nextra:x:3000:app\n")
	}
	return dir
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeSpec(t *testing.T, dir string, s *specs.Spec) {
	t.Helper()
	data, err := json.MarshalIndent(s, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "config.json"), string(data))
}

func runcCmd(t *testing.T, runc, root string, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(runc, append([]string{"--root", root}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("runc %s: %v: %s%s", strings.Join(args, " "), err, stderr.Bytes(), stdout.Bytes())
	}
	return stdout.Bytes()
}

// runcDetached starts a container in the background. Its stdio is
// /dev/null: a pipe to this test would be inherited by the container and
// keep the command's Wait from returning.
func runcDetached(t *testing.T, runc, root, bundle, id string) {
	t.Helper()
	cmd := exec.Command(runc, "--root", root, "run", "--detach", "--bundle", bundle, id)
	errFile, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer errFile.Close()
	cmd.Stderr = errFile
	if err := cmd.Run(); err != nil {
		msg, _ := os.ReadFile(errFile.Name())
		t.Fatalf("runc run --detach %s: %v: %s", id, err, msg)
	}
}

// removeCgroupDirs removes the parent cgroup the test's containers were
// under, in every hierarchy (runc removes only the containers' own).
func removeCgroupDirs(t *testing.T, parent string) {
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", parent))
	if d := filepath.Join("/sys/fs/cgroup", parent); exists(d) {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("remove cgroup %s: %v", d, err)
		}
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
