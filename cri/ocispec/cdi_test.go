package ocispec

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// writeCDISpec writes a CDI spec of vendor example.com, class test, with
// one device: a node at nodePath (host /dev/null, numbers taken from it),
// an env var CDI_<NAME>=<value> and a bind mount of mountSrc at /cdi/<name>.
func writeCDISpec(t *testing.T, dir, file, name, value, nodePath, mountSrc string) {
	t.Helper()
	spec := fmt.Sprintf(`{"cdiVersion": "0.6.0", "kind": "example.com/test", "devices": [{"name": %q, "containerEdits": {
  "env": ["CDI_%s=%s"],
  "deviceNodes": [{"path": %q, "hostPath": "/dev/null", "permissions": "rw"}],
  "mounts": [{"hostPath": %q, "containerPath": "/cdi/%s", "options": ["ro", "bind"]}]}}]}`,
		name, strings.ToUpper(name), value, nodePath, mountSrc, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, file), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCDIDevicesOfConfig(t *testing.T) {
	cfg := baseContainer()
	cfg.CDIDevices = []*runtime.CDIDevice{{Name: "example.com/test=b"}, {Name: "example.com/test=a"}}
	cfg.Annotations = map[string]string{
		"cdi.k8s.io/z-plugin": "example.com/test=c",
		"cdi.k8s.io/a-plugin": "example.com/test=a, example.com/test=d",
		"other":               "not a device",
	}
	got, err := CDIDevices(cfg)
	want := []string{"example.com/test=b", "example.com/test=a", "example.com/test=d", "example.com/test=c"}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("CDIDevices: %v, %v; want %v (the field's first, then the annotations by key, each once)", got, err, want)
	}
	if got, err := CDIDevices(baseContainer()); err != nil || got != nil {
		t.Fatalf("no devices asked for: %v, %v", got, err)
	}
	for _, c := range []struct {
		devs  []*runtime.CDIDevice
		ann   map[string]string
		field string
	}{
		{[]*runtime.CDIDevice{{Name: "example.com/test=a"}, {Name: "gpu0"}}, nil, `cdi_devices[1]: CDI device "gpu0"`},
		{[]*runtime.CDIDevice{{Name: ""}}, nil, `cdi_devices[0]: CDI device ""`},
		{nil, map[string]string{"cdi.k8s.io/p": "example.com/test=a,,"}, `annotations[cdi.k8s.io/p]: CDI device ""`},
		{nil, map[string]string{"cdi.k8s.io/p": "example.com/test"}, `annotations[cdi.k8s.io/p]: CDI device "example.com/test"`},
	} {
		cfg := baseContainer()
		cfg.CDIDevices, cfg.Annotations = c.devs, c.ann
		_, err := CDIDevices(cfg)
		wantErr(t, err, "container config: "+c.field)
	}
}

func TestCDIInject(t *testing.T) {
	dir, mnt := t.TempDir(), t.TempDir()
	cdi := NewCDI([]string{dir})
	// Written after NewCDI: the dirs are read at each container.
	writeCDISpec(t, dir, "test.json", "one", "1", "/dev/cdi-null", mnt)
	cfg := baseContainer()
	cfg.CDIDevices = []*runtime.CDIDevice{{Name: "example.com/test=one"}}
	spec, err := Container(cfg, podConfig(false), ImageConfig{}, containerParams(t))
	if err != nil {
		t.Fatal(err)
	}
	devs, _ := CDIDevices(cfg)
	if err := cdi.Check(devs); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if err := cdi.Inject(spec, devs); err != nil {
		t.Fatalf("Inject: %v", err)
	}
	i := slices.IndexFunc(spec.Linux.Devices, func(d specs.LinuxDevice) bool { return d.Path == "/dev/cdi-null" })
	if i < 0 || spec.Linux.Devices[i].Type != "c" || spec.Linux.Devices[i].Major != 1 || spec.Linux.Devices[i].Minor != 3 {
		t.Fatalf("devices %+v: want /dev/cdi-null, c 1:3 (/dev/null's)", spec.Linux.Devices)
	}
	rules := spec.Linux.Resources.Devices
	if len(rules) < 2 || rules[0].Allow || !slices.ContainsFunc(rules[1:], func(r specs.LinuxDeviceCgroup) bool {
		return r.Allow && r.Type == "c" && r.Major != nil && *r.Major == 1 && r.Minor != nil && *r.Minor == 3 && r.Access == "rw"
	}) {
		t.Fatalf("device cgroup %+v: want deny all, then c 1:3 rw allowed", rules)
	}
	if !slices.Contains(spec.Process.Env, "CDI_ONE=1") || !slices.Contains(spec.Process.Env, "HOSTNAME=podhost") {
		t.Fatalf("env %v: want CDI_ONE=1 beside the container's own", spec.Process.Env)
	}
	if !slices.ContainsFunc(spec.Mounts, func(m specs.Mount) bool { return m.Destination == "/cdi/one" && m.Source == mnt }) ||
		!slices.ContainsFunc(spec.Mounts, func(m specs.Mount) bool { return m.Destination == "/proc" }) {
		t.Fatalf("mounts %+v: want /cdi/one from %s beside the defaults", spec.Mounts, mnt)
	}
}

// TestCDIPrecedence: a later dir's spec wins for a device both define (the
// dynamic specs of /var/run/cdi over the static ones of /etc/cdi).
func TestCDIPrecedence(t *testing.T) {
	static, dynamic := t.TempDir(), t.TempDir()
	writeCDISpec(t, static, "a.json", "dev", "static", "/dev/cdi-a", t.TempDir())
	writeCDISpec(t, dynamic, "a.json", "dev", "dynamic", "/dev/cdi-a", t.TempDir())
	spec := &specs.Spec{Process: &specs.Process{}, Linux: &specs.Linux{}}
	if err := NewCDI([]string{static, dynamic}).Inject(spec, []string{"example.com/test=dev"}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(spec.Process.Env, []string{"CDI_DEV=dynamic"}) {
		t.Fatalf("env %v: want the later dir's", spec.Process.Env)
	}
}

func TestCDIErrors(t *testing.T) {
	dir := t.TempDir()
	writeCDISpec(t, dir, "test.yaml", "ok", "1", "/dev/cdi-ok", t.TempDir())
	cdi := NewCDI([]string{dir, filepath.Join(dir, "absent")})
	if got := cdi.SpecDirs(); !slices.Equal(got, []string{dir, filepath.Join(dir, "absent")}) {
		t.Fatalf("SpecDirs %v", got)
	}
	spec := func() *specs.Spec { return &specs.Spec{Process: &specs.Process{}, Linux: &specs.Linux{}} }

	err := cdi.Check([]string{"example.com/test=ok", "example.com/test=gone", "other.org/x=y"})
	want := `CDI device "example.com/test=gone", "other.org/x=y": not found in the CDI specs of ` + dir + ", " + filepath.Join(dir, "absent")
	if !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Check of unknown devices: %v; want NotFound with %q", err, want)
	}

	// A spec that does not load is told when a device is not found (it may
	// be why), and does not fail the devices of other specs.
	os.WriteFile(filepath.Join(dir, "broken.json"), []byte(`{"cdiVersion": "0.6.0", "kind": "example.com/broken", "devices": [{"name": "x"`), 0o644)
	if err := cdi.Inject(spec(), []string{"example.com/test=ok"}); err != nil {
		t.Fatalf("a device of a good spec beside a broken one: %v", err)
	}
	err = cdi.Inject(spec(), []string{"example.com/broken=x"})
	if !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), "specs that did not load: "+filepath.Join(dir, "broken.json")) {
		t.Fatalf("a device of a broken spec: %v; want NotFound naming the spec that did not load", err)
	}

	// A device node whose host path is gone cannot be made: Check refuses
	// it as Inject would, naming the device.
	os.WriteFile(filepath.Join(dir, "nohost.json"), []byte(`{"cdiVersion": "0.6.0", "kind": "example.com/nohost", "devices": [
  {"name": "x", "containerEdits": {"deviceNodes": [{"path": "/dev/cdi-x", "hostPath": "/dev/no-such-device-here"}]}}]}`), 0o644)
	for _, f := range []func() error{
		func() error { return cdi.Check([]string{"example.com/nohost=x"}) },
		func() error { return cdi.Inject(spec(), []string{"example.com/nohost=x"}) },
	} {
		err := f()
		wantErr(t, err, `container config: CDI devices "example.com/nohost=x": `)
		if !strings.Contains(err.Error(), "/dev/no-such-device-here") {
			t.Fatalf("%v: want the host path named", err)
		}
	}
	if err := cdi.Inject(spec(), nil); err != nil {
		t.Fatalf("no devices: %v", err)
	}
}

func TestCDIDefaultDirs(t *testing.T) {
	if got := NewCDI(nil).SpecDirs(); !slices.Equal(got, []string{"/etc/cdi", "/var/run/cdi"}) {
		t.Fatalf("default dirs %v, want containerd's", got)
	}
}
