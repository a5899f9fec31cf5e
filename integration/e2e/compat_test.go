package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	ocs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/specs"
)

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

// TestDocker113Bundle: Docker 1.13's whole flow, as its libcontainerd
// drives it, on bundles written as it wrote them (spec 1.0.0-rc2: the
// capabilities a flat list, a seccomp rule per syscall name...), with the
// tests' runtime: bin/runc, of today's spec, which runs the daemon's
// translation of the bundle, and in make test's second end-to-end run
// bin/runc-rc2, Docker 1.13's own runc, which reads it as it is. Create
// under a seccomp profile, an exec given a capability list, a tty exec
// resized, pause and resume, resource updates, stats, an OOM kill, a live
// restore, a daemon SIGKILLed while the init dies and the id created again;
// the client's config.json bytes are never changed.
func TestDocker113Bundle(t *testing.T) {
	t.Parallel()
	runc := fixture.Runc(t)
	// runc 1.0.0-rc2 sometimes leaves an empty cgroup behind when it
	// deletes a container whose init is still being reaped (about 1 run in
	// 20 here): remove the init's cgroups, if empty, once all is done.
	var cgroups []string
	t.Cleanup(func() { removeCgroups(t, cgroups) })
	// Made before the daemon, so its cleanup (runc delete --force of what
	// is left, cgroups included) runs after the daemon has stopped.
	root := fixture.RuncRootFor(t, runc)
	d := startDaemon(t)
	b, data := fixture.NewDocker113Bundle(t, fixture.Args("mkdir", "/tmp/d", "--", "sleep", "forever"), denyMkdirRC2)
	id := fixture.UniqueID(t)
	req := &types.CreateContainerRequest{Id: id, BundlePath: b.Path, Runtime: runc, RuntimeArgs: []string{"--root", root}}
	evs, c := docker113Create(t, d, req)
	cgroups = v1Cgroups(t, int(c.GetProcesses()[0].GetSystemPid()))
	wantTranslation(t, d, id, b.Path)

	t.Run("exec with a capability list", func(t *testing.T) { execCapList(t, d, evs, id, "caps") })
	t.Run("tty exec resized", func(t *testing.T) { ttyExecResized(t, d, evs, id) })
	t.Run("pause and resume", func(t *testing.T) { pauseResume(t, d, evs, id) })
	t.Run("update memory", func(t *testing.T) { updateMemory(t, d, id) })
	t.Run("update the block IO weight", func(t *testing.T) { updateBlkioWeight(t, d, id) })
	t.Run("stats", func(t *testing.T) { docker113Stats(t, d, id) })
	t.Run("OOM", func(t *testing.T) { docker113OOM(t, d, runc, root) })
	t.Run("live restore", func(t *testing.T) { evs = liveRestore(t, d, evs, id) })
	t.Run("daemon killed", func(t *testing.T) { evs = daemonKilled(t, d, evs, req) })
	if after, err := os.ReadFile(filepath.Join(b.Path, "config.json")); err != nil || !bytes.Equal(after, data) {
		t.Fatalf("config.json changed (%v):\n%s\nwas:\n%s", err, after, data)
	}
}

// denyMkdirRC2 is a profile that lets everything through but mkdir and
// mkdirat, which fail with EPERM, in the shape Docker 1.13 gave its
// profiles (Docker113Spec writes one rule per name; no errnoRet then).
func denyMkdirRC2(s *specs.Spec) {
	s.Linux.Seccomp = &ocs.LinuxSeccomp{
		DefaultAction: ocs.ActAllow,
		Architectures: []ocs.Arch{ocs.ArchX86_64, ocs.ArchX86, ocs.ArchAARCH64},
		Syscalls:      []ocs.LinuxSyscall{{Names: []string{"mkdir", "mkdirat"}, Action: ocs.ActErrno}},
	}
}

// docker113Create creates the container; its init reports the seccomp
// profile's verdict on mkdir, and State its capabilities, the bundle's list.
func docker113Create(t *testing.T, d *fixture.Daemon, req *types.CreateContainerRequest) (*fixture.Events, *types.Container) {
	t.Helper()
	stdout, out := fifo(t, t.TempDir(), "stdout")
	evs := d.SubscribeAfter(time.Now(), req.Id)
	r := proto.Clone(req).(*types.CreateContainerRequest)
	r.Stdout = stdout
	c := createReq(t, d, r)
	evs.Expect("start-container " + req.Id)
	if got, want := readUntil(t, out, "\n"), "mkdir /tmp/d: "+syscall.EPERM.Error()+"\n"; got != want {
		t.Errorf("init printed %q, want %q: the seccomp profile was not applied", got, want)
	}
	want := fixture.DefaultSpec().Process.Capabilities.Effective
	if caps := c.GetProcesses()[0].GetCapabilities(); !slices.Equal(caps, want) {
		t.Errorf("init capabilities %q, want the bundle's list %q", caps, want)
	}
	return evs, c
}

// wantTranslation: a runtime of today's spec runs a bundle of the daemon's
// own, under the state dir, whose rootfs is the client's by absolute path;
// a runtime of the bundle's era runs the client's.
func wantTranslation(t *testing.T, d *fixture.Daemon, id, client string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(d.StateDir, id, ".bundle", "config.json"))
	if fixture.OldRuntime() {
		if !os.IsNotExist(err) {
			t.Fatalf("runc of the bundle's era given a translated bundle (%v)", err)
		}
		return
	}
	var spec specs.Spec
	if err != nil || json.Unmarshal(data, &spec) != nil || spec.Root == nil || spec.Root.Path != filepath.Join(client, "rootfs") {
		t.Fatalf("translated bundle: %v, root %+v; want the client's rootfs %s", err, spec.Root, filepath.Join(client, "rootfs"))
	}
}

// execCapList runs an exec given a capability list; it gets exactly those.
func execCapList(t *testing.T, d *fixture.Daemon, evs *fixture.Events, id, pid string) {
	t.Helper()
	stdout, out := fifo(t, t.TempDir(), "stdout")
	req := execReq(id, pid, "capeff")
	req.Capabilities, req.Stdout = []string{"CAP_KILL", "CAP_CHOWN"}, stdout
	addProcess(t, d, req)
	readUntil(t, out, "capeff 0000000000000021\n") // CAP_CHOWN (0) and CAP_KILL (5)
	evs.Expect("start-process "+id+" "+pid, "exit "+id+" "+pid+" 0")
}

func ttyExecResized(t *testing.T, d *fixture.Daemon, evs *fixture.Events, id string) {
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
}

func pauseResume(t *testing.T, d *fixture.Daemon, evs *fixture.Events, id string) {
	t.Helper()
	for _, st := range []string{"paused", "running"} {
		if _, err := d.Client.UpdateContainer(ctxT(t), &types.UpdateContainerRequest{Id: id, Status: st}); err != nil {
			t.Fatalf("UpdateContainer %s: %v", st, err)
		}
		evs.Expect(map[string]string{"paused": "pause ", "running": "resume "}[st] + id)
		if got := state(t, d, id).Status; got != st {
			t.Fatalf("status %q after UpdateContainer %s", got, st)
		}
	}
}

// updateMemory: a memory limit reaches the container's cgroup.
func updateMemory(t *testing.T, d *fixture.Daemon, id string) {
	const limit = 64 << 20
	_, err := d.Client.UpdateContainer(ctxT(t), &types.UpdateContainerRequest{Id: id, Resources: &types.UpdateResource{MemoryLimit: limit}})
	file := memoryCgroupFile(t, initPid(t, d, id), "memory.limit_in_bytes")
	if got := readTrim(t, file); err != nil || got != strconv.Itoa(limit) {
		t.Fatalf("UpdateContainer: %v; %s = %s, want %d", err, file, got, limit)
	}
}

// updateBlkioWeight: the weight is given to the runtime under the name it
// reads (runc 1.0.0-rc2 "blkioWeight", today's runc "weight": the other
// name either would ignore, changing nothing), so it writes the cgroup's
// weight file: blkio.weight, or for today's runc blkio.bfq.weight where
// the IO scheduler (BFQ) has only that one. runc 1.0.0-rc2 knows only
// blkio.weight, so on such a host its write fails, naming the file.
func updateBlkioWeight(t *testing.T, d *fixture.Daemon, id string) {
	cg := blkioCgroup(t, initPid(t, d, id))
	file := "blkio.weight"
	if _, err := os.Stat(filepath.Join(cg, file)); os.IsNotExist(err) && !fixture.OldRuntime() {
		file = "blkio.bfq.weight"
	}
	_, err := d.Client.UpdateContainer(ctxT(t), &types.UpdateContainerRequest{Id: id,
		Resources: &types.UpdateResource{BlkioWeight: 500}})
	got, rerr := os.ReadFile(filepath.Join(cg, file))
	switch {
	case os.IsNotExist(rerr):
		if err == nil || !strings.Contains(err.Error(), file) {
			t.Fatalf("UpdateContainer on a host without %s: %v, want the runtime's failure to write it", file, err)
		}
	case err != nil || strings.TrimSpace(string(got)) != "500":
		t.Fatalf("UpdateContainer: %v; %s %q (%v), want 500", err, file, got, rerr)
	}
}

func docker113Stats(t *testing.T, d *fixture.Daemon, id string) {
	st, err := d.Client.Stats(ctxT(t), &types.StatsRequest{Id: id})
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	cg := st.GetCgroupStats()
	if cg.GetMemoryStats().GetUsage().GetUsage() == 0 || cg.GetPidsStats().GetCurrent() == 0 {
		t.Fatalf("Stats: memory usage %d, pids %d; want both above 0", cg.GetMemoryStats().GetUsage().GetUsage(), cg.GetPidsStats().GetCurrent())
	}
}

// docker113OOM: a container over its 16 MiB limit gives start-container,
// oom, then exit(init, 137); its config.json is never changed either.
func docker113OOM(t *testing.T, d *fixture.Daemon, runc, root string) {
	b, data := fixture.NewDocker113Bundle(t, fixture.MemoryLimit(16<<20), fixture.Args("alloc"))
	id := fixture.UniqueID(t)
	evs := d.SubscribeAfter(time.Now(), id)
	createReq(t, d, &types.CreateContainerRequest{Id: id, BundlePath: b.Path, Runtime: runc, RuntimeArgs: []string{"--root", root}})
	evs.Expect("start-container "+id, "oom "+id, "exit "+id+" init 137")
	if after, err := os.ReadFile(filepath.Join(b.Path, "config.json")); err != nil || !bytes.Equal(after, data) {
		t.Fatalf("config.json changed (%v)", err)
	}
}

// liveRestore: the daemon stops (Docker's live restore keeps containers
// running), starts again and adopts the container: same init, execs with
// capabilities and pause work as before.
func liveRestore(t *testing.T, d *fixture.Daemon, evs *fixture.Events, id string) *fixture.Events {
	pid, last := initPid(t, d, id), evs.Last
	d.Stop()
	restart(t, d)
	evs = d.SubscribeAfter(last.Timestamp.AsTime(), id)
	if c := state(t, d, id); c.Status != "running" || initPid(t, d, id) != pid {
		t.Fatalf("after the restart: %s, init %d; want running, init %d", c.Status, initPid(t, d, id), pid)
	}
	execCapList(t, d, evs, id, "caps-after-restart")
	pauseResume(t, d, evs, id)
	return evs
}

// daemonKilled: the daemon is SIGKILLed and the init killed while it is
// down; the restart replays the exit, 137, and the id can be created again:
// that create waits for the old incarnation's cleanup, which leaves
// nothing of it behind (its translated bundle included).
func daemonKilled(t *testing.T, d *fixture.Daemon, evs *fixture.Events, req *types.CreateContainerRequest) *fixture.Events {
	id, pid, last := req.Id, initPid(t, d, req.Id), evs.Last
	d.Kill()
	kill(t, pid, syscall.SIGKILL)
	waitDead(t, pid)
	restart(t, d)
	evs = d.SubscribeAfter(last.Timestamp.AsTime(), id)
	evs.Expect("exit " + id + " init 137")
	wantGone(t, d, id)
	createReq(t, d, req)
	evs.Expect("start-container " + id)
	if left, _ := filepath.Glob(filepath.Join(d.StateDir, ".retired", id+".*")); len(left) != 0 {
		t.Errorf("the old incarnation's state is left: %q", left)
	}
	wantTranslation(t, d, id, req.BundlePath)
	signal(t, d, id, "init", syscall.SIGKILL)
	evs.Expect("exit " + id + " init 137")
	return evs
}

// TestDocker113BundleUntranslatable: a Docker 1.13 bundle that today's
// runtime could not read even translated (a memory limit of 2^64-1, a
// uint64 then, an int64 today) is refused with InvalidArgument naming the
// file and the member; nothing is journaled or left in the state dir, and
// config.json is unchanged. A runtime of the bundle's era is given no
// translation, so there is nothing to refuse.
func TestDocker113BundleUntranslatable(t *testing.T) {
	t.Parallel()
	if fixture.OldRuntime() {
		t.Skip("the tests' runtime (runc of spec before 1.0.0-rc5) reads Docker 1.13's bundles as they are: nothing is translated")
	}
	d := startDaemon(t)
	b, data := fixture.NewDocker113Bundle(t)
	bad := bytes.Replace(data, []byte(`"swappiness": 18446744073709551615`), []byte(`"limit": 18446744073709551615, "swappiness": 18446744073709551615`), 1)
	if bytes.Equal(bad, data) {
		t.Fatalf("no swappiness to put a limit beside in:\n%s", data)
	}
	config := filepath.Join(b.Path, "config.json")
	if err := os.WriteFile(config, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	id := fixture.UniqueID(t)
	_, err := d.Client.CreateContainer(ctxT(t), &types.CreateContainerRequest{Id: id, BundlePath: b.Path})
	wantErr(t, "CreateContainer of an untranslatable bundle", err, codes.InvalidArgument, "~"+config+": cannot be given to a runtime of spec "+specs.Version+": linux.resources.memory.limit: want int64")
	if _, err := os.Stat(filepath.Join(d.StateDir, id)); !os.IsNotExist(err) {
		t.Errorf("state dir of the refused container: %v, want none", err)
	}
	wantEvents(t, "journal of the refused container", storedSince(t, d, &timestamppb.Timestamp{}, id))
	if after, err := os.ReadFile(config); err != nil || !bytes.Equal(after, bad) {
		t.Fatalf("config.json changed (%v)", err)
	}
}
