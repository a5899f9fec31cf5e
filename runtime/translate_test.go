package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/specs"
)

// TestTranslatedBundle: a runtime of today's spec cannot read Docker
// 1.13's config.json, so it runs the daemon's translation of it, kept in
// the container's state dir with the client's rootfs by absolute path; an
// exec (given capabilities) works, before and after a restart (Load) and
// after a Recover of a lost state.json, which still reports the client's
// bundle; Delete removes the translation; the client's config.json is
// never written. A runtime of the list era runs the bundle as it is.
func TestTranslatedBundle(t *testing.T) {
	e := newEnv(t)
	b, data := fixture.NewDocker113Bundle(t, sleeper)
	opts := e.opts(fixture.UniqueID(t), b.Path)
	launch(t, opts) // by another process, as a daemon before its restart
	dir := filepath.Join(e.root, opts.ID)
	translated := !fixture.OldRuntime()
	checkTranslation(t, dir, b.Path, translated)

	c := load(t, e.root, opts.ID)
	execCaps(t, c, "e1")
	must(t, os.Rename(filepath.Join(dir, "state.json"), filepath.Join(dir, "state.json.lost")))
	closeAll(c)
	r, err := runtime.Recover(e.root, opts.ID, runtime.RecoverHint{Runtime: e.runc, RuntimeArgs: []string{"--root", e.runcRoot}, Shim: e.shim})
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	t.Cleanup(func() { deleteContainer(t, r) })
	if r.Bundle() != b.Path || r.Spec() == nil || r.Spec().Dialect.CapabilityList == translated {
		t.Fatalf("recovered bundle %q, spec %+v; want the client's %q, capability list %v", r.Bundle(), r.Spec(), b.Path, !translated)
	}
	execCaps(t, r, "e2")

	must(t, initOf(t, r).Signal(syscall.SIGKILL))
	wantStatus(t, initOf(t, r), 137)
	deleteContainer(t, r)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("after Delete: %s is still there (%v), with %q", dir, err, dirEntries(t, dir))
	}
	if after, err := os.ReadFile(filepath.Join(b.Path, "config.json")); err != nil || !bytes.Equal(after, data) {
		t.Fatalf("the client's config.json changed (%v)", err)
	}
}

// checkTranslation: with translated, dir/.bundle/config.json is today's
// spec with the client's rootfs by absolute path; without, there is none.
func checkTranslation(t *testing.T, dir, client string, translated bool) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, ".bundle", "config.json"))
	if !translated {
		if !os.IsNotExist(err) {
			t.Fatalf("a runtime of the bundle's own era got a translation (%v)", err)
		}
		return
	}
	var spec specs.Spec
	if err != nil || json.Unmarshal(data, &spec) != nil {
		t.Fatalf("translated bundle: %v\n%s", err, data)
	}
	if spec.Root.Path != filepath.Join(client, "rootfs") || spec.Version != specs.Version || spec.Process.Capabilities == nil {
		t.Fatalf("translated config: version %q, root %+v, capabilities %+v", spec.Version, spec.Root, spec.Process.Capabilities)
	}
}

// execCaps runs an exec given CAP_KILL and CAP_CHOWN and checks it got
// exactly them.
func execCaps(t *testing.T, c *runtime.Container, id string) {
	t.Helper()
	stdout, out := fifo(t, t.TempDir(), "stdout")
	spec := execSpec("capeff")
	caps := []string{"CAP_KILL", "CAP_CHOWN"}
	spec.Capabilities = &specs.LinuxCapabilities{Bounding: caps, Effective: caps, Inheritable: caps, Permitted: caps}
	p, err := c.Exec(context.Background(), id, spec, runtime.Stdio{Stdout: stdout})
	if err != nil {
		t.Fatalf("Exec %s: %v", id, err)
	}
	readUntil(t, out, "capeff 0000000000000021\n") // CAP_CHOWN (0) and CAP_KILL (5)
	wantStatus(t, p, 0)
	must(t, c.RemoveProcess(id))
}

// TestTranslationRefused: a config.json whose translation today's runtime
// could still not read is InvalidArgument naming the member, and nothing
// is left in the state root nor changed in the bundle.
func TestTranslationRefused(t *testing.T) {
	e := newEnv(t)
	if fixture.OldRuntime() {
		t.Skip("the tests' runtime reads the list era's bundles: nothing is translated")
	}
	b, data := fixture.NewDocker113Bundle(t)
	bad := withMemoryLimit(t, data, "18446744073709551615") // a uint64 then, an int64 today
	must(t, os.WriteFile(filepath.Join(b.Path, "config.json"), bad, 0o644))
	_, err := runtime.New(e.opts(fixture.UniqueID(t), b.Path))
	if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "linux.resources.memory.limit") || !strings.Contains(err.Error(), b.Path) {
		t.Fatalf("New: %v; want InvalidArgument naming the file and linux.resources.memory.limit", err)
	}
	if left := dirEntries(t, e.root); len(left) != 0 {
		t.Fatalf("a refused create left %q in the state root", left)
	}
	if after, _ := os.ReadFile(filepath.Join(b.Path, "config.json")); !bytes.Equal(after, bad) {
		t.Fatal("the client's config.json changed")
	}
}

// withMemoryLimit sets linux.resources.memory.limit of a config.json to
// the JSON number limit.
func withMemoryLimit(t *testing.T, data []byte, limit string) []byte {
	t.Helper()
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	must(t, dec.Decode(&doc))
	res := doc["linux"].(map[string]any)["resources"].(map[string]any)
	res["memory"] = map[string]any{"limit": json.Number(limit)}
	out, err := json.Marshal(doc)
	must(t, err)
	return out
}
