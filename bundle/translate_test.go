package bundle

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/specs"
)

// TestNeedsTranslation: only a list-era bundle given to a runtime of a
// later spec is translated.
func TestNeedsTranslation(t *testing.T) {
	list, object := Dialect{CapabilityList: true}, Dialect{}
	for _, tc := range []struct {
		bundle, runtime Dialect
		want            bool
	}{{list, object, true}, {list, list, false}, {object, object, false}, {object, list, false}} {
		if got := tc.bundle.NeedsTranslation(tc.runtime); got != tc.want {
			t.Errorf("bundle %+v, runtime %+v: %v, want %v", tc.bundle, tc.runtime, got, tc.want)
		}
	}
}

// TestTranslateDocker113: a config.json as Docker 1.13 wrote it, with a
// relative rootfs, bind mount, hook and namespace path added, reads as
// today's spec with every member that moved or changed form in its new
// place and the same meaning; the input bytes are not touched.
func TestTranslateDocker113(t *testing.T) {
	data := withRelativePaths(t, readTestdata(t, "config-1.0.0-rc2.json"))
	before := bytes.Clone(data)
	out, err := Translate(data, "/bundles/b1")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, before) {
		t.Fatal("Translate changed its input")
	}
	var spec specs.Spec
	if err := json.Unmarshal(out, &spec); err != nil {
		t.Fatalf("today's spec cannot read the translation: %v\n%s", err, out)
	}
	caps := []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_KILL", "CAP_SETUID", "CAP_AUDIT_WRITE"}
	r, p := spec.Linux.Resources, spec.Process
	for what, ok := range map[string]bool{
		"ociVersion today's":               spec.Version == specs.Version,
		"capabilities: the list, 4 sets":   reflect.DeepEqual(*p.Capabilities, specs.LinuxCapabilities{Bounding: caps, Effective: caps, Inheritable: caps, Permitted: caps}),
		"oomScoreAdj moved to process":     p.OOMScoreAdj != nil && *p.OOMScoreAdj == 0,
		"disableOOMKiller moved":           r.Memory.DisableOOMKiller != nil && !*r.Memory.DisableOOMKiller,
		"swappiness kept exactly":          r.Memory.Swappiness != nil && *r.Memory.Swappiness == 1<<64-1,
		"pids limit 0 dropped":             r.Pids != nil && r.Pids.Limit == nil,
		"blkioWeight renamed":              r.BlockIO != nil && r.BlockIO.Weight != nil && *r.BlockIO.Weight == 0,
		"seccomp rule names":               reflect.DeepEqual(spec.Linux.Seccomp.Syscalls[0].Names, []string{"accept"}),
		"absolute root kept":               spec.Root.Path == "/var/lib/docker/aufs/mnt/abc",
		"relative bind source resolved":    spec.Mounts[2].Source == "/bundles/b1/volumes/data",
		"proc source kept":                 spec.Mounts[0].Source == "proc",
		"relative hook path resolved":      prestart(t, out)[1] == "/bundles/b1/hooks/setup",
		"absolute hook path kept":          prestart(t, out)[0] == "/usr/bin/dockerd",
		"relative namespace path resolved": spec.Linux.Namespaces[5].Path == "/bundles/b1/ns/net",
	} {
		if !ok {
			t.Errorf("%s: no\n%s", what, out)
		}
	}
	for _, gone := range []string{`"platform"`, `"blkioWeight"`, `"name":`} {
		if bytes.Contains(out, []byte(gone)) {
			t.Errorf("the translation still has %s:\n%s", gone, out)
		}
	}
}

// prestart is the paths of a config's prestart hooks (the member is
// deprecated in today's Go types, not in the documents of the list era),
// padded so that a missing hook reads as "".
func prestart(t *testing.T, data []byte) []string {
	t.Helper()
	var doc struct {
		Hooks struct{ Prestart []struct{ Path string } }
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, h := range doc.Hooks.Prestart {
		paths = append(paths, h.Path)
	}
	return append(paths, "", "")
}

// withRelativePaths adds to a config what a runtime resolves against its
// bundle: a bind mount, a hook and a namespace, by relative paths.
func withRelativePaths(t *testing.T, data []byte) []byte {
	t.Helper()
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	doc["mounts"] = append(doc["mounts"].([]any), map[string]any{"destination": "/data", "type": "bind", "source": "volumes/data", "options": []any{"rbind", "rprivate"}})
	hooks := doc["hooks"].(map[string]any)
	hooks["prestart"] = append(hooks["prestart"].([]any), map[string]any{"path": "hooks/setup"})
	linux := doc["linux"].(map[string]any)
	linux["namespaces"] = append(linux["namespaces"].([]any), map[string]any{"type": "network", "path": "ns/net"})
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTranslateRelativeRoot: "rootfs" becomes the client's, by absolute path.
func TestTranslateRelativeRoot(t *testing.T) {
	out, err := Translate(readTestdata(t, "config-1.0.0-rc1.json"), "/bundles/rc1")
	if err != nil {
		t.Fatal(err)
	}
	var spec specs.Spec
	if err := json.Unmarshal(out, &spec); err != nil || spec.Root.Path != "/bundles/rc1/rootfs" {
		t.Fatalf("root %+v (%v), want /bundles/rc1/rootfs", spec.Root, err)
	}
}

// TestTranslatedDecodesAlike: the daemon reads the translation as the same
// process it read from the original, now in today's dialect.
func TestTranslatedDecodesAlike(t *testing.T) {
	for _, file := range []string{"config-1.0.0-rc1.json", "config-1.0.0-rc2.json"} {
		data := readTestdata(t, file)
		orig, err := Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		out, err := Translate(data, "/b")
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(out)
		if err != nil {
			t.Fatalf("%s: the translation does not decode: %v", file, err)
		}
		if got.Dialect.CapabilityList || !reflect.DeepEqual(got.Process.Capabilities, orig.Process.Capabilities) || !reflect.DeepEqual(got.Process.Args, orig.Process.Args) {
			t.Errorf("%s: translation reads as %+v, dialect %+v; original %+v", file, got.Process, got.Dialect, orig.Process)
		}
	}
}

// TestTranslateRefuses: what cannot be translated is InvalidArgument
// naming the member.
func TestTranslateRefuses(t *testing.T) {
	const process = `"process":{"args":["a"],"cwd":"/","capabilities":["CAP_KILL"]}`
	for name, tc := range map[string]struct{ doc, want string }{
		"no root":                 {`{` + process + `}`, "root.path: missing"},
		"memory limit over int64": {`{` + process + `,"root":{"path":"/r"},"linux":{"resources":{"memory":{"limit":18446744073709551615}}}}`, "linux.resources.memory.limit: want int64"},
		"seccomp rule unnamed":    {`{` + process + `,"root":{"path":"/r"},"linux":{"seccomp":{"syscalls":[{"name":"read"},{"action":"SCMP_ACT_ALLOW"}]}}}`, "linux.seccomp.syscalls[1].name: missing"},
		"seccomp name a number":   {`{` + process + `,"root":{"path":"/r"},"linux":{"seccomp":{"syscalls":[{"name":7}]}}}`, "linux.seccomp.syscalls[0].name: want a syscall name"},
		"mounts not a list":       {`{` + process + `,"root":{"path":"/r"},"mounts":{}}`, "mounts: want a list"},
		"resources not an object": {`{` + process + `,"root":{"path":"/r"},"linux":{"resources":[]}}`, "linux.resources: want an object"},
		"a hook not an object":    {`{` + process + `,"root":{"path":"/r"},"hooks":{"prestart":["/bin/true"]}}`, "hooks.prestart[0]: want an object"},
	} {
		_, err := Translate([]byte(tc.doc), "/b")
		if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want InvalidArgument containing %q", name, err, tc.want)
		}
	}
}
