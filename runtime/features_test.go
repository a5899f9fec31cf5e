package runtime_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/specs"
)

// TestRuntimeFeatures: today's runc and runc 1.0.0-rc2 (Docker 1.13's) are
// told apart by their own help, and a binary replaced in place is probed
// again.
func TestRuntimeFeatures(t *testing.T) {
	rc2 := filepath.Join(fixture.RepoRoot(), "bin", "runc-rc2")
	if _, err := os.Stat(rc2); err != nil {
		t.Fatalf("%v: run `make bin/runc-rc2` first", err)
	}
	// bin/runc is the runc go.mod pins, which reads the runtime-spec
	// version go.mod pins: specs.Version.
	modern := runtime.Features{ConsoleSocket: true, Log: true, PidFile: true, NoNewKeyring: true, PreserveFds: true, Spec: specs.Version}
	old := runtime.Features{ConsoleSocket: false, Log: true, PidFile: true, NoNewKeyring: true, PreserveFds: false, Spec: "1.0.0-rc2-dev"}
	current := filepath.Join(fixture.RepoRoot(), "bin", "runc")
	if got := runtime.RuntimeFeatures(current); got != modern {
		t.Errorf("bin/runc: %+v, want %+v", got, modern)
	}
	if got := runtime.RuntimeFeatures(rc2); got != old {
		t.Errorf("bin/runc-rc2: %+v, want %+v", got, old)
	}
	// One path, first today's runc, then rc2 copied over it.
	swapped := filepath.Join(t.TempDir(), "runc")
	must(t, fixture.CopyFile(current, swapped, 0o755))
	if got := runtime.RuntimeFeatures(swapped); got != modern {
		t.Errorf("copy of bin/runc: %+v, want %+v", got, modern)
	}
	must(t, fixture.CopyFile(rc2, swapped, 0o755))
	must(t, os.Chtimes(swapped, time.Now(), time.Now().Add(time.Minute))) // a new mtime, even on a coarse clock
	if got := runtime.RuntimeFeatures(swapped); got != old {
		t.Errorf("bin/runc-rc2 copied over it: %+v, want %+v", got, old)
	}
	assumed := modern
	assumed.Spec = ""
	if got := runtime.RuntimeFeatures("/no/such/runtime"); got != assumed || got.Dialect() != modern.Dialect() {
		t.Errorf("a missing runtime: %+v, want today's runc assumed %+v", got, assumed)
	}
	if modern.Dialect().CapabilityList || !old.Dialect().CapabilityList {
		t.Errorf("dialects: bin/runc %+v, bin/runc-rc2 %+v; want the object, then the list", modern.Dialect(), old.Dialect())
	}
}

// TestRuntimeFeaturesHangingProbe: a runtime whose --help hangs, leaving a
// child that holds its stdout, costs the probe's bound once and is taken
// for today's runc; the probe does not wait for the child's pipe for ever
// (it would hold the feature cache, and every later create with it).
func TestRuntimeFeaturesHangingProbe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := filepath.Join(dir, "hanging-runtime")
	// The background sleep keeps stdout open after the shell is killed.
	must(t, os.WriteFile(script, []byte("#!/bin/sh\nsleep 60 &\necho $! > "+filepath.Join(dir, "child")+"\nexec sleep 60\n"), 0o755))
	t.Cleanup(func() {
		if data, err := os.ReadFile(filepath.Join(dir, "child")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	start := time.Now()
	modern := runtime.Features{ConsoleSocket: true, Log: true, PidFile: true, NoNewKeyring: true, PreserveFds: true}
	if got := runtime.RuntimeFeatures(script); got != modern || got.Dialect().CapabilityList {
		t.Errorf("hanging runtime: %+v, want today's runc assumed %+v", got, modern)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("the probe took %v: it waited on the pipe a child of the runtime holds", d)
	}
	if got := runtime.RuntimeFeatures(script); got != modern || time.Since(start) > 16*time.Second {
		t.Errorf("the second call was not answered from the cache")
	}
}
