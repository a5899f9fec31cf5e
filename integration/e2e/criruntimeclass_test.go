package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/evjournal/containerd/integration/fixture"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// crunBinary is Debian's crun, the second runtime of the RuntimeClass
// tests (.ci/run installs it).
func crunBinary(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("crun")
	if err != nil {
		t.Fatalf("crun: %v (install Debian's crun: the runtime handler tests run pods on it beside runc)", err)
	}
	return p
}

// crunHandlerRuntime is the runtime to name for a crun handler: crun
// itself, or on a hybrid cgroup host whose cgroup2 mount has controllers
// (this one: hugetlb) crun through a wrapper. crun 1.8 refuses every
// create there ("cgroups in hybrid mode not supported, drop all
// controllers from cgroupv2", whatever its cgroup manager), so the wrapper
// runs it in a mount namespace of its own where the cgroup2 mount's
// controller list reads empty; crun then uses the v1 controllers, as runc
// does. The wrapper is the handler's runtime, as any wrapper may be.
func crunHandlerRuntime(t *testing.T, crun string) string {
	t.Helper()
	b, err := os.ReadFile("/sys/fs/cgroup/unified/cgroup.controllers")
	if err != nil || len(strings.TrimSpace(string(b))) == 0 {
		return crun
	}
	wrapper := filepath.Join(t.TempDir(), "crun-hybrid")
	script := "#!/bin/sh\nexec unshare -m --propagation private sh -c " +
		"'mount --bind /dev/null /sys/fs/cgroup/unified/cgroup.controllers && exec \"$0\" \"$@\"' " + crun + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return wrapper
}

// runtimeList is what a runtime lists in its root: ids.
func runtimeList(t *testing.T, runtime, root string) []string {
	t.Helper()
	if _, err := os.Stat(root); os.IsNotExist(err) {
		return nil
	}
	out, err := exec.Command(runtime, "--root", root, "list", "--format", "json").Output()
	if err != nil {
		t.Fatalf("%s --root %s list: %v", runtime, root, err)
	}
	var l []struct {
		ID string `json:"id"`
	}
	if len(strings.TrimSpace(string(out))) > 0 && strings.TrimSpace(string(out)) != "null" {
		if err := json.Unmarshal(out, &l); err != nil {
			t.Fatalf("%s list: %v: %q", runtime, err, out)
		}
	}
	var ids []string
	for _, c := range l {
		ids = append(ids, c.ID)
	}
	return ids
}

// processRuntime is the runtime a process of the daemon's container runs
// through, as its shim was told (process.json).
func processRuntime(t *testing.T, e *criEnv, id, pid string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(e.d.StateDir, id, pid, "process.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Runtime string `json:"runtime"`
	}
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	return p.Runtime
}

// TestCRIRuntimeHandlers: runc (the default handler) and crun (a handler
// named crun) side by side in one daemon. Status advertises both, runc with
// its features (read from `runc features`) and crun 1.8 without (it has no
// features command); an unknown handler is NotFound; a pod of each handler
// runs its pause and its containers in that runtime's root only (the other
// runtime does not list them), ExecSync and an in-place resize work in each
// (an exec or update through runc of a crun container would find no
// container), and after a SIGKILL
// of the daemon the crun pod's old container still execs and a new
// container of it runs on crun. test-handler (node conformance's
// RuntimeClass handler) is one more name for runc. Nothing is left in
// either root once the pods are removed.
func TestCRIRuntimeHandlers(t *testing.T) {
	t.Parallel()
	crun := crunBinary(t)
	crunRuntime := crunHandlerRuntime(t, crun)
	// The CRI's runc: bin/runc also in make test's pass with the old runc
	// (prepareCRIEnv), which cannot run today's specs.
	runc := fixture.Runc(t)
	if fixture.OldRuntime() {
		runc = filepath.Join(fixture.RepoRoot(), "bin", "runc")
	}
	var crunRoot string
	e := prepareCRIEnv(t, func(e *criEnv) []string {
		crunRoot = filepath.Join(e.d.Dir, "crun")
		return []string{"--cri-runtime-handler", "crun=" + crunRuntime + ",--root=" + crunRoot,
			"--cri-runtime-handler", "test-handler=" + runc + ",--root=" + e.d.RuncRoot}
	})
	t.Cleanup(func() { // after the daemon's cleanup: what a failed test left in crun's root
		for _, id := range runtimeList(t, crun, crunRoot) {
			exec.Command(crun, "--root", crunRoot, "delete", "--force", id).Run()
		}
	})
	e.start(t)
	ctx := cctx(t)

	st, err := e.rt.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*runtimeapi.RuntimeHandlerFeatures{}
	var names []string
	for _, h := range st.RuntimeHandlers {
		got[h.Name] = h.Features
		names = append(names, h.Name)
	}
	if !slices.Equal(names, []string{"", "crun", "test-handler"}) {
		t.Fatalf("Status lists the handlers %q, want the default, crun, test-handler", names)
	}
	for _, n := range []string{"", "test-handler"} {
		if !got[n].GetRecursiveReadOnlyMounts() || !got[n].GetUserNamespaces() {
			t.Errorf("handler %q (runc): features %v, want both", n, got[n])
		}
	}
	if got["crun"].GetRecursiveReadOnlyMounts() || got["crun"].GetUserNamespaces() {
		t.Errorf("handler crun (crun 1.8, no features command): features %v, want none advertised", got["crun"])
	}

	_, err = e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: e.podConfig(t, "nohandler"), RuntimeHandler: "kata"})
	wantCRICode(t, "RunPodSandbox with an unknown handler", err, codes.NotFound)

	ref := e.pushTestinit(t, "e2e/handlers:1")
	pulled, err := e.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatal(err)
	}
	pods := map[string]string{} // handler -> pod id
	ctrs := map[string]string{} // handler -> container id
	cfgs := map[string]*runtimeapi.PodSandboxConfig{}
	for _, h := range []string{"", "crun", "test-handler"} {
		name := "on-" + strings.TrimSuffix(h+"-", "-")
		if h == "" {
			name = "on-default"
		}
		cfg := e.podConfig(t, name)
		run, err := e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: h})
		if err != nil {
			t.Fatalf("RunPodSandbox on %q: %v", h, err)
		}
		pods[h], cfgs[h] = run.PodSandboxId, cfg
		ctrs[h] = startSleeper(t, e, cfg, run.PodSandboxId, "c", pulled.ImageRef, nil)
		ps, err := e.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: run.PodSandboxId})
		if err != nil || ps.Status.RuntimeHandler != h {
			t.Fatalf("pod on %q: PodSandboxStatus says handler %q (%v)", h, ps.GetStatus().GetRuntimeHandler(), err)
		}
	}
	crunIDs, runcIDs := runtimeList(t, crun, crunRoot), runtimeList(t, runc, e.d.RuncRoot)
	for h, pod := range pods {
		for _, id := range []string{pod, ctrs[h]} {
			inCrun, inRunc := slices.Contains(crunIDs, id), slices.Contains(runcIDs, id)
			if inCrun != (h == "crun") || inRunc != (h != "crun") {
				t.Errorf("%s of the pod on %q: listed by crun %v, by runc %v", id, h, inCrun, inRunc)
			}
			want := runc
			if h == "crun" {
				want = crunRuntime
			}
			if rt := processRuntime(t, e, id, "init"); rt != want {
				t.Errorf("%s of the pod on %q runs through %s, want %s", id, h, rt, want)
			}
		}
		ex, err := execSync(t, e, ctrs[h], "echo hello-"+h)
		if err != nil || ex.ExitCode != 0 || !strings.Contains(string(ex.Stdout), "hello-"+h) {
			t.Errorf("ExecSync in the container on %q: %v %v", h, ex, err)
		}
		// An in-place resize goes through the container's runtime too.
		limit := int64(96<<20 + 4096*len(h))
		if _, err := e.rt.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: ctrs[h],
			Linux: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: limit}}); err != nil {
			t.Errorf("UpdateContainerResources of the container on %q: %v", h, err)
		} else if got := readTrim(t, memoryCgroupFile(t, initPid(t, e.d, ctrs[h]), "memory.limit_in_bytes")); got != fmt.Sprint(limit) {
			t.Errorf("the container on %q: memory limit %s after the update, want %d", h, got, limit)
		}
	}

	e.d.Kill()
	restart(t, e.d)
	if ex, err := execSync(t, e, ctrs["crun"], "echo again"); err != nil || ex.ExitCode != 0 {
		t.Errorf("ExecSync in the crun container after the restart: %v %v", ex, err)
	}
	later := startSleeper(t, e, cfgs["crun"], pods["crun"], "later", pulled.ImageRef, nil)
	if !slices.Contains(runtimeList(t, crun, crunRoot), later) || processRuntime(t, e, later, "init") != crunRuntime {
		t.Errorf("a container of the crun pod made after the restart does not run on crun")
	}
	// The other pods first, then the crun pod with removePod's checks:
	// its shims gone, its cgroups removed, no mount left under the daemon.
	for _, h := range []string{"", "test-handler"} {
		if _, err := e.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: pods[h]}); err != nil {
			t.Fatal(err)
		}
	}
	removePod(t, e, pods["crun"])
	if left := runtimeList(t, crun, crunRoot); len(left) > 0 {
		t.Errorf("left in crun's root: %v", left)
	}
	if left := runtimeList(t, runc, e.d.RuncRoot); len(left) > 0 {
		t.Errorf("left in runc's root: %v", left)
	}
}
