package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/integration/fixture"
)

// runcRC2 is bin/runc-rc2 (make build), the runc Docker 1.13 shipped.
func runcRC2(t *testing.T) string {
	t.Helper()
	path := filepath.Join(fixture.RepoRoot(), "bin", "runc-rc2")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%v: run `make bin/runc-rc2` (or `make build`) first", err)
	}
	return path
}

// TestDocker113Bundle: what Docker 1.13's libcontainerd does with the runc
// it shipped (1.0.0-rc2), on a bundle it wrote (spec 1.0.0-rc2: the
// capabilities a flat list...): create, an exec given a capability list, a
// tty exec resized, pause and resume, a kill; config.json is never touched.
func TestDocker113Bundle(t *testing.T) {
	t.Parallel()
	runc := runcRC2(t)
	// Made before the daemon, so its cleanup (runc delete --force of what
	// is left, cgroups included) runs after the daemon has stopped.
	root := fixture.RuncRootFor(t, runc)
	d := startDaemon(t)
	b := fixture.NewBundle(t)
	config := filepath.Join(b.Path, "config.json")
	data, err := fixture.Docker113Spec(b.Spec, "1.0.0-rc2-dev")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(config, data, 0o644); err != nil {
		t.Fatal(err)
	}
	id := fixture.UniqueID(t)
	evs := d.SubscribeAfter(time.Now(), id)
	c := createReq(t, d, &types.CreateContainerRequest{Id: id, BundlePath: b.Path,
		Runtime: runc, RuntimeArgs: []string{"--root", root}})
	evs.Expect("start-container " + id)
	if caps := c.GetProcesses()[0].GetCapabilities(); !slices.Equal(caps, b.Spec.Process.Capabilities.Effective) {
		t.Errorf("init capabilities %q, want the bundle's list %q", caps, b.Spec.Process.Capabilities.Effective)
	}

	t.Run("exec with a capability list", func(t *testing.T) {
		stdout, out := fifo(t, t.TempDir(), "stdout")
		req := execReq(id, "caps", "capeff")
		req.Capabilities, req.Stdout = []string{"CAP_KILL", "CAP_CHOWN"}, stdout
		addProcess(t, d, req)
		readUntil(t, out, "capeff 0000000000000021\n") // CAP_CHOWN (0) and CAP_KILL (5)
		evs.Expect("start-process "+id+" caps", "exit "+id+" caps 0")
	})
	t.Run("tty exec resized", func(t *testing.T) {
		stdout, out := fifo(t, t.TempDir(), "stdout")
		req := execReq(id, "tty", "winsize")
		req.Terminal, req.Stdout = true, stdout
		addProcess(t, d, req)
		evs.Expect("start-process " + id + " tty")
		readUntil(t, out, "winsize ")
		if _, err := d.Client.UpdateProcess(ctxT(t), &types.UpdateProcessRequest{Id: id, Pid: "tty", Width: 123, Height: 45}); err != nil {
			t.Fatalf("UpdateProcess resize: %v", err)
		}
		readUntil(t, out, "winsize 45x123")
		signal(t, d, id, "tty", syscall.SIGKILL)
		evs.Expect("exit " + id + " tty 137")
	})
	t.Run("pause and resume", func(t *testing.T) {
		for _, st := range []string{"paused", "running"} {
			if _, err := d.Client.UpdateContainer(ctxT(t), &types.UpdateContainerRequest{Id: id, Status: st}); err != nil {
				t.Fatalf("UpdateContainer %s: %v", st, err)
			}
			evs.Expect(map[string]string{"paused": "pause ", "running": "resume "}[st] + id)
			if got := state(t, d, id).Status; got != st {
				t.Fatalf("status %q after UpdateContainer %s", got, st)
			}
		}
	})
	signal(t, d, id, "init", syscall.SIGKILL)
	evs.Expect("exit " + id + " init 137")
	if after, err := os.ReadFile(config); err != nil || !bytes.Equal(after, data) {
		t.Fatalf("config.json changed (%v):\n%s\nwas:\n%s", err, after, data)
	}
}
