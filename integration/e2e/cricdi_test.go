package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestCRICDIDevices: a CDI spec of the test's own, in a spec dir given by
// --cdi-spec-dir, gives a container that asks for its device (in
// cdi_devices, or in a cdi.k8s.io/ annotation) a device node (/dev/null's
// numbers under a new path, openable through the device cgroup), an env var
// and a bind mount, each seen inside the running container; a device no
// spec defines is NotFound naming it, and its create leaves nothing on disk.
func TestCRICDIDevices(t *testing.T) {
	t.Parallel()
	specDir, data := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "hello"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := fmt.Sprintf(`cdiVersion: "0.6.0"
kind: e2e.example.com/dev
devices:
- name: one
  containerEdits:
    env: ["CDI_E2E=one"]
    deviceNodes: [{path: /dev/cdi-one, hostPath: /dev/null}]
- name: two
  containerEdits:
    env: ["CDI_E2E=two"]
    deviceNodes: [{path: /dev/cdi-two, hostPath: /dev/null, permissions: rw}]
containerEdits:
  mounts: [{hostPath: %q, containerPath: /cdi/data, options: [ro, bind]}]
`, data)
	if err := os.WriteFile(filepath.Join(specDir, "e2e.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newCRIEnv(t, func(*criEnv) []string { return []string{"--cdi-spec-dir", specDir} })
	ref := e.pushTestinit(t, "e2e/cdi:1")
	pod, podID, byField := runSleeper(t, e, "cdi", ref, func(c *runtimeapi.ContainerConfig) {
		c.CDIDevices = []*runtimeapi.CDIDevice{{Name: "e2e.example.com/dev=one"}}
	})
	byAnnotation := addSleeper(t, e, pod, podID, "cdi-annotated", func(c *runtimeapi.ContainerConfig) {
		c.Annotations = map[string]string{"cdi.k8s.io/e2e-plugin_two": "e2e.example.com/dev=two"}
	})
	for _, c := range []struct{ cid, dev string }{{byField, "one"}, {byAnnotation, "two"}} {
		for step, want := range map[string]string{
			"device /dev/cdi-" + c.dev: "device /dev/cdi-" + c.dev + ": c 1:3, open: ok",
			"env CDI_E2E":              "env CDI_E2E=" + c.dev,
			"file /cdi/data/hello":     "file /cdi/data/hello: from the host",
		} {
			ex, err := execSync(t, e, c.cid, step)
			if got := strings.TrimSpace(string(ex.GetStdout())); err != nil || got != want {
				t.Errorf("device %s, %s: %q (%v), want %q", c.dev, step, got, err, want)
			}
		}
	}
	// The other container's device is not there.
	if ex, err := execSync(t, e, byField, "device /dev/cdi-two"); err != nil || !strings.Contains(string(ex.Stdout), "no such file") {
		t.Errorf("a device the container did not ask for: %q %v", ex.GetStdout(), err)
	}

	before := onDisk(t, e)
	cfg := &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "cdi-unknown"}, Image: &runtimeapi.ImageSpec{Image: ref},
		Command: []string{"/testinit"}, Linux: &runtimeapi.LinuxContainerConfig{},
		CDIDevices: []*runtimeapi.CDIDevice{{Name: "e2e.example.com/dev=one"}, {Name: "e2e.example.com/dev=three"}}}
	_, err := e.rt.CreateContainer(cctx(t), &runtimeapi.CreateContainerRequest{PodSandboxId: podID, SandboxConfig: pod, Config: cfg})
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), `"e2e.example.com/dev=three"`) || !strings.Contains(err.Error(), specDir) {
		t.Fatalf("CreateContainer with a device no spec defines: %v, want NotFound naming it and the spec dir", err)
	}
	if after := onDisk(t, e); !slices.Equal(before, after) {
		t.Fatalf("the refused create changed the daemon's dirs:\nbefore %v\nafter  %v", before, after)
	}
	removePod(t, e, podID)
}

// onDisk lists the entries of the CRI's container and rootfs dirs.
func onDisk(t *testing.T, e *criEnv) []string {
	t.Helper()
	var out []string
	for _, d := range []string{"root/cri/containers", "root/images/containers"} {
		entries, err := os.ReadDir(filepath.Join(e.d.Dir, d))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, en := range entries {
			out = append(out, d+"/"+en.Name())
		}
	}
	return out
}
