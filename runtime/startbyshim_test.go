package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/runtime"
)

// TestCreateWithStart: with CreateOpts.Start the shim runs `runc start`
// itself, so the init is running when Create returns (no Start call), and
// the shim recorded the memory cgroup's OOM counter from before the start,
// which OOMBaseline gives for the dir the OOM watch uses.
func TestCreateWithStart(t *testing.T) {
	e := newEnv(t)
	c := e.newContainer(t, fixture.NewBundle(t, sleeper, fixture.MemoryLimit(64<<20)))
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	p, err := c.Create(ctx, runtime.CreateOpts{Start: true})
	if err != nil {
		t.Fatalf("Create with Start: %v", err)
	}
	if got := status(t, c); got != "running" {
		t.Fatalf("runc state after Create with Start: %q, want running", got)
	}
	v1, v2 := c.OOMCgroups()
	if v1 == "" && v2 == "" {
		t.Skip("no memory cgroup with an OOM counter on this machine (cgroup v1 memory or v2 memory.events)")
	}
	dir, file := v1, "memory.oom_control"
	if dir == "" {
		dir, file = v2, "memory.events"
	}
	got, ok := c.OOMBaseline(dir)
	if !ok {
		t.Fatalf("OOMBaseline(%s): none recorded by the shim", dir)
	}
	if want := oomKills(t, filepath.Join(dir, file)); got != want {
		t.Fatalf("OOMBaseline(%s) = %d, the counter holds %d (nothing was killed)", dir, got, want)
	}
	if _, ok := c.OOMBaseline("/sys/fs/cgroup/memory/not-this-container"); ok {
		t.Fatal("OOMBaseline answered for a dir that is not the container's")
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, p, 137)
}

// TestCreateWithStartFailure: a `runc start` that fails in the shim is
// answered as the daemon's own failed start was (`container "<id>": start:
// exit status N: "<runc's output>"`, a *RuncError), and leaves nothing: no
// runc container, no process dir, no shim (fixture.Main checks processes).
func TestCreateWithStartFailure(t *testing.T) {
	e := newEnv(t)
	wrapper := filepath.Join(t.TempDir(), "runc-start-fails")
	script := fmt.Sprintf(`#!/bin/sh
sub=; prev=
for a in "$@"; do sub=$prev; prev=$a; done
if [ "$sub" = start ]; then echo "start refused by the test runtime"; exit 3; fi
exec %s "$@"
`, e.runc)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	opts := e.opts(fixture.UniqueID(t), fixture.NewBundle(t, sleeper).Path)
	opts.Runtime = wrapper
	c, err := runtime.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteContainer(t, c) })
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	_, err = c.Create(ctx, runtime.CreateOpts{Start: true})
	want := fmt.Sprintf("container %q: start: exit status 3: %q", c.ID(), "start refused by the test runtime\n")
	if err == nil || err.Error() != want {
		t.Fatalf("Create with a failing start: %v\nwant %s", err, want)
	}
	var re *runtime.RuncError
	if !errors.As(err, &re) || re.Op != "start" || re.Status != 3 {
		t.Fatalf("error %v is not a *RuncError of start with status 3 (%+v)", err, re)
	}
	out, lerr := exec.Command(e.runc, "--root", e.runcRoot, "list", "-q").CombinedOutput()
	if lerr != nil {
		t.Fatalf("runc list: %v: %s", lerr, out)
	}
	if strings.Contains(string(out), c.ID()) {
		t.Fatalf("the runc container is left after the failed start: runc list says %q", out)
	}
	if names := dirEntries(t, c.Dir()); len(names) != 0 && !(len(names) == 1 && names[0] == "state.json") {
		t.Fatalf("container dir after the failed start holds %v, want only state.json", names)
	}
}

// oomKills reads the oom_kill counter of a cgroup counter file.
func oomKills(t *testing.T, path string) uint64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "oom_kill "); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("%s: %q", path, line)
			}
			return n
		}
	}
	t.Fatalf("%s has no oom_kill line:\n%s", path, data)
	return 0
}
