package server

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/cri/ocispec"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// withCDI restarts e's service (not its loop) resolving CDI devices
// through cdi.
func (e *env) withCDI(cdi CDIDevices) {
	e.t.Helper()
	e.srv.Close()
	e.cfg.CDI = cdi
	e.start()
}

// cdiSpecDir is a spec dir with the device example.com/test=one: the node
// /dev/cdi-null (host /dev/null), CDI_ONE=1, a bind mount at /cdi/one.
func cdiSpecDir(t *testing.T) string {
	dir := t.TempDir()
	spec := fmt.Sprintf(`{"cdiVersion": "0.6.0", "kind": "example.com/test", "devices": [{"name": "one", "containerEdits": {
  "env": ["CDI_ONE=1"], "deviceNodes": [{"path": "/dev/cdi-null", "hostPath": "/dev/null"}],
  "mounts": [{"hostPath": %q, "containerPath": "/cdi/one", "options": ["ro", "bind"]}]}}]}`, t.TempDir())
	if err := os.WriteFile(filepath.Join(dir, "test.json"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func (e *env) createWith(pod string, cfg *runtimeapi.ContainerConfig) (string, error) {
	r, err := e.srv.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: cfg})
	return r.GetContainerId(), err
}

// bundleSpec is the config.json of a created container's bundle.
func (e *env) bundleSpec(id string) *specs.Spec {
	e.t.Helper()
	raw, err := os.ReadFile(filepath.Join(e.cfg.Root, "containers", id, "bundle", "config.json"))
	if err != nil {
		e.t.Fatal(err)
	}
	var s specs.Spec
	if err := json.Unmarshal(raw, &s); err != nil {
		e.t.Fatal(err)
	}
	return &s
}

// checkNoContainer: the refused creates left no container, dir, rootfs or
// object (only the pod's).
func (e *env) checkNoContainer(pod string) {
	e.t.Helper()
	e.loop.work.Wait()
	if _, ctrs := e.listed(); len(ctrs) > 0 || len(e.dirs("containers")) > 0 || len(e.images.rootfsIDs()) > 0 ||
		!slices.Equal(e.loop.objectIDs(), []string{pod}) {
		e.t.Fatalf("left: containers %v, dirs %v, rootfs %v, objects %v", ctrs, e.dirs("containers"), e.images.rootfsIDs(), e.loop.objectIDs())
	}
}

// TestCreateContainerCDI: the devices of cdi_devices and of the cdi.k8s.io/
// annotations are in the container's bundle; a device no spec defines is
// NotFound naming it, a malformed name InvalidArgument, a daemon without
// CDI FailedPrecondition, each leaving nothing, and the name free.
func TestCreateContainerCDI(t *testing.T) {
	e := newEnv(t)
	pod := e.runPod("p")

	cfg := ctrConfig("c")
	cfg.CDIDevices = []*runtimeapi.CDIDevice{{Name: "example.com/test=one"}}
	_, err := e.createWith(pod, cfg)
	wantCode(t, err, codes.FailedPrecondition, "example.com/test=one", "CDI is not configured")
	e.checkNoContainer(pod)

	e.withCDI(ocispec.NewCDI([]string{cdiSpecDir(t)}))
	for _, c := range []struct {
		devs []*runtimeapi.CDIDevice
		ann  map[string]string
		code codes.Code
		says string
	}{
		{[]*runtimeapi.CDIDevice{{Name: "example.com/test=one"}, {Name: "example.com/test=two"}}, nil, codes.NotFound, `CDI device "example.com/test=two": not found`},
		{nil, map[string]string{"cdi.k8s.io/plugin": "example.com/test=three"}, codes.NotFound, `CDI device "example.com/test=three": not found`},
		{[]*runtimeapi.CDIDevice{{Name: "gpu0"}}, nil, codes.InvalidArgument, `cdi_devices[0]: CDI device "gpu0"`},
	} {
		cfg := ctrConfig("c")
		cfg.CDIDevices, cfg.Annotations = c.devs, c.ann
		_, err := e.createWith(pod, cfg)
		wantCode(t, err, c.code, c.says)
		e.checkNoContainer(pod)
	}

	for _, bend := range []func(*runtimeapi.ContainerConfig){
		func(c *runtimeapi.ContainerConfig) {
			c.CDIDevices = []*runtimeapi.CDIDevice{{Name: "example.com/test=one"}}
		},
		func(c *runtimeapi.ContainerConfig) {
			c.Annotations = map[string]string{"cdi.k8s.io/plugin_dev": "example.com/test=one"}
		},
	} {
		cfg := ctrConfig("c")
		bend(cfg)
		id, err := e.createWith(pod, cfg)
		if err != nil {
			t.Fatalf("CreateContainer with a CDI device: %v", err)
		}
		s := e.bundleSpec(id)
		if !slices.ContainsFunc(s.Linux.Devices, func(d specs.LinuxDevice) bool { return d.Path == "/dev/cdi-null" && d.Major == 1 && d.Minor == 3 }) ||
			!slices.Contains(s.Process.Env, "CDI_ONE=1") ||
			!slices.ContainsFunc(s.Mounts, func(m specs.Mount) bool { return m.Destination == "/cdi/one" }) {
			t.Fatalf("the bundle's spec lacks the CDI device's edits: devices %+v env %v mounts %+v", s.Linux.Devices, s.Process.Env, s.Mounts)
		}
		if _, err := e.srv.RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
			t.Fatal(err)
		}
	}
}

// brokenInject passes Check and fails Inject: a spec removed while the
// create ran.
type brokenInject struct{ CDIDevices }

func (brokenInject) Check([]string) error { return nil }
func (brokenInject) Inject(*specs.Spec, []string) error {
	return fmt.Errorf("CDI device %q: gone: %w", "example.com/test=one", errdefs.ErrNotFound)
}

// TestCreateContainerCDIInjectFails: a device that stops resolving between
// the check and the spec's edit fails the create, and its undo removes
// the rootfs and dir it made.
func TestCreateContainerCDIInjectFails(t *testing.T) {
	e := newEnv(t)
	pod := e.runPod("p")
	e.withCDI(brokenInject{})
	cfg := ctrConfig("c")
	cfg.CDIDevices = []*runtimeapi.CDIDevice{{Name: "example.com/test=one"}}
	_, err := e.createWith(pod, cfg)
	wantCode(t, err, codes.NotFound, "example.com/test=one")
	e.checkNoContainer(pod)
}
