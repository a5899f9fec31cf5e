package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// v1Cgroups are the cgroup v1 dirs of pid, one per hierarchy, as
// /sys/fs/cgroup/<controllers>/<path>; blkio's first.
func v1Cgroups(t *testing.T, pid int) []string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 || f[1] == "" {
			continue // the cgroup2 entry
		}
		dir := filepath.Join("/sys/fs/cgroup", strings.TrimPrefix(f[1], "name="), f[2])
		if slices.Contains(strings.Split(f[1], ","), "blkio") {
			dirs = append([]string{dir}, dirs...)
		} else {
			dirs = append(dirs, dir)
		}
	}
	return dirs
}

// removeCgroups removes the cgroup dirs that are left, empty. The kernel
// may hold a cgroup busy for a moment after its last process was reaped
// and no event says when it lets go, so rmdir is retried, bounded.
func removeCgroups(t *testing.T, dirs []string) {
	deadline := time.Now().Add(10 * time.Second)
	for _, dir := range dirs {
		for {
			err := os.Remove(dir) // rmdir: only an empty cgroup goes
			if err == nil || os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("cgroup %s left behind: %v", dir, err)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// blkioCgroup is the blkio cgroup dir of pid (cgroup v1).
func blkioCgroup(t *testing.T, pid int) string {
	t.Helper()
	dirs := v1Cgroups(t, pid)
	if len(dirs) == 0 || !strings.HasPrefix(dirs[0], "/sys/fs/cgroup/blkio/") {
		t.Fatalf("pid %d has no blkio cgroup: %q", pid, dirs)
	}
	return dirs[0]
}

// TestDocker113Bundle: what Docker 1.13's libcontainerd does with the runc
// it shipped (1.0.0-rc2), on a bundle it wrote (spec 1.0.0-rc2: the
// capabilities a flat list...): create, an exec given a capability list, a
// tty exec resized, pause and resume, a resource update, a kill; config.json
// is never touched.
func TestDocker113Bundle(t *testing.T) {
	t.Parallel()
	runc := runcRC2(t)
	// runc 1.0.0-rc2 sometimes leaves an empty cgroup behind when it
	// deletes a container whose init is still being reaped (about 1 run in
	// 20 here): remove the init's cgroups, if empty, once all is done.
	var cgroups []string
	t.Cleanup(func() { removeCgroups(t, cgroups) })
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
	cgroups = v1Cgroups(t, int(c.GetProcesses()[0].GetSystemPid()))
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
	t.Run("update the block IO weight", func(t *testing.T) {
		// runc 1.0.0-rc2 reads "blkioWeight" (today's "weight" it would
		// ignore, changing nothing) and writes blkio.weight, which a host
		// whose IO scheduler has none (BFQ: blkio.bfq.weight) lacks.
		cg := blkioCgroup(t, int(c.GetProcesses()[0].GetSystemPid()))
		_, err := d.Client.UpdateContainer(ctxT(t), &types.UpdateContainerRequest{Id: id,
			Resources: &types.UpdateResource{BlkioWeight: 500}})
		got, rerr := os.ReadFile(filepath.Join(cg, "blkio.weight"))
		switch {
		case os.IsNotExist(rerr):
			if err == nil || !strings.Contains(err.Error(), "blkio.weight") {
				t.Fatalf("UpdateContainer on a host without blkio.weight: %v, want runc's failure to write it", err)
			}
		case err != nil || strings.TrimSpace(string(got)) != "500":
			t.Fatalf("UpdateContainer: %v; blkio.weight %q (%v), want 500", err, got, rerr)
		}
	})
	signal(t, d, id, "init", syscall.SIGKILL)
	evs.Expect("exit " + id + " init 137")
	if after, err := os.ReadFile(config); err != nil || !bytes.Equal(after, data) {
		t.Fatalf("config.json changed (%v):\n%s\nwas:\n%s", err, after, data)
	}
}
