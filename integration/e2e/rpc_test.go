package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/integration/fixture"
)

// TestGetServerVersion: the version RPC answers 0.2.x and the same through ctr.
func TestGetServerVersion(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	v, err := d.Client.GetServerVersion(ctxT(t), &types.GetServerVersionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if v.Major != 0 || v.Minor != 2 {
		t.Fatalf("version %d.%d.%d, want 0.2.x", v.Major, v.Minor, v.Patch)
	}
	want := fmt.Sprintf("daemon version %d.%d.%d commit: %s\n", v.Major, v.Minor, v.Patch, v.Revision)
	if out := ctrOK(t, d, "version"); out != want {
		t.Fatalf("ctr version printed %q, want %q", out, want)
	}
}

// TestCreateStateSignal: CreateContainer journals and publishes
// start-container before it replies, and it is the container's first event;
// State reports the container as clients expect (docs/api.md section 8, item
// 8); Signal SIGKILL gives exit 137, SIGTERM to an init that dies of it 143;
// after the exit the id is gone from State and can be created again at once.
func TestCreateStateSignal(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := fixture.UniqueID(t)
	b := fixture.NewBundle(t)

	t0 := timestamppb.Now()
	evs := d.SubscribeAfter(t0.AsTime(), "")
	resp, err := d.Client.CreateContainer(ctxT(t), &types.CreateContainerRequest{
		Id: id, BundlePath: b.Path, Labels: []string{"a=1", "b"},
	})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	// Right after the reply, the event is in the journal already.
	wantEvents(t, "journal right after the CreateContainer reply", storedSince(t, d, t0, id), "start-container "+id)
	first := evs.Next(eventWait)
	if fixture.Describe(first) != "start-container "+id || first.Pid != "" || first.Status != 0 {
		t.Fatalf("first event: %+v, want start-container %s with empty pid and status 0", first, id)
	}
	if first.Seq == 0 || first.Timestamp == nil {
		t.Fatalf("start-container without seq or timestamp: %+v", first)
	}

	created := resp.GetContainer()
	if created.GetId() != id || created.GetBundlePath() != b.Path || created.GetStatus() != "running" {
		t.Fatalf("CreateContainer reply: %+v", created)
	}
	c := state(t, d, id)
	if c.Status != "running" || c.BundlePath != b.Path || !slices.Equal(c.Labels, []string{"a=1", "b"}) {
		t.Fatalf("State: status %q bundlePath %q labels %q, want running, %q, [a=1 b]", c.Status, c.BundlePath, c.Labels, b.Path)
	}
	initProc := process(c, "init")
	if initProc == nil || initProc.SystemPid == 0 || len(c.Processes) != 1 {
		t.Fatalf("State processes: %+v, want one init with a systemPid", c.Processes)
	}
	if len(c.Pids) == 0 || c.Pids[0] != initProc.SystemPid {
		t.Fatalf("State pids %v, want pids[0] = init's host pid %d", c.Pids, initProc.SystemPid)
	}
	if !alive(int(initProc.SystemPid)) || cmdline(int(initProc.SystemPid)) != "/testinit sleep forever" {
		t.Fatalf("init host pid %d: alive %v, cmdline %q", initProc.SystemPid, alive(int(initProc.SystemPid)), cmdline(int(initProc.SystemPid)))
	}
	if !slices.Equal(initProc.Args, b.Spec.Process.Args) || initProc.Cwd != "/" || initProc.Stdout != "/dev/null" {
		t.Fatalf("init process: args %q cwd %q stdout %q", initProc.Args, initProc.Cwd, initProc.Stdout)
	}
	all, err := d.Client.State(ctxT(t), &types.StateRequest{})
	if err != nil || len(all.Containers) != 1 || all.Machine.GetCpus() == 0 || all.Machine.GetMemory() == 0 {
		t.Fatalf("State of all: %v, %v; want our one container and the machine", all, err)
	}

	// SIGKILL: 137. Once the exit is out, the id is gone and free.
	signal(t, d, id, "init", syscall.SIGKILL)
	exit := evs.Expect("exit " + id + " init 137")[0]
	wantGone(t, d, id)
	if evs := storedSince(t, d, exit.Timestamp, ""); len(evs) != 0 {
		t.Fatalf("events after the exit: %q", describeAll(evs))
	}

	// The same id at once, with an init that dies of SIGTERM: 143.
	b2 := fixture.NewBundle(t)
	noPidNamespace(t, b2)
	create(t, d, id, b2)
	evs.Expect("start-container " + id)
	signal(t, d, id, "init", syscall.SIGTERM)
	evs.Expect("exit " + id + " init 143")
	wantGone(t, d, id)
}

// TestAddProcess: an exec's systemPid is its live host process, listed by
// State; start-process comes before the exec's exit with its status; when
// init is killed while an exec runs, the exec's exit comes before init's.
func TestAddProcess(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := fixture.UniqueID(t)
	evs, _ := startAndWait(t, d, id, fixture.NewBundle(t))

	t0 := timestamppb.Now()
	pid := addProcess(t, d, execReq(id, "sleeper", "sleep", "forever"))
	// start-process is journaled before the reply.
	wantEvents(t, "journal right after the AddProcess reply", storedSince(t, d, t0, id), "start-process "+id+" sleeper")
	evs.Expect("start-process " + id + " sleeper")
	waitCmdline(t, pid, "/testinit sleep forever")
	c := state(t, d, id)
	p := process(c, "sleeper")
	if p == nil || int(p.SystemPid) != pid || !slices.Contains(c.Pids, uint32(pid)) {
		t.Fatalf("State: process sleeper %+v, pids %v; want systemPid %d listed", p, c.Pids, pid)
	}
	if c.Pids[0] != process(c, "init").SystemPid {
		t.Fatalf("State pids %v: init is not first", c.Pids)
	}

	// An exec that exits by itself: start-process, then exit with its status.
	addProcess(t, d, execReq(id, "three", "echo", "hi", "--", "exit", "3"))
	evs.Expect("start-process "+id+" three", "exit "+id+" three 3")
	if process(state(t, d, id), "three") != nil {
		t.Fatal("State still lists an exec after its exit event")
	}
	// The exit of a signalled exec.
	victim := addProcess(t, d, execReq(id, "victim", "sleep", "forever"))
	evs.Expect("start-process " + id + " victim")
	signal(t, d, id, "victim", syscall.SIGTERM) // not pid 1 of the namespace: dies of it
	evs.Expect("exit " + id + " victim 143")
	waitDead(t, victim)

	// init killed while an exec runs: the exec's exit first.
	signal(t, d, id, "init", syscall.SIGKILL)
	evs.Expect("exit "+id+" sleeper 137", "exit "+id+" init 137")
	waitDead(t, pid)
	wantGone(t, d, id)
}

// TestInitTermWhileExecRuns: SIGTERM to an init that dies of it, while an
// exec runs, gives exit(exec, 137) then exit(init, 143) (docs/api.md
// section 4), promptly.
func TestInitTermWhileExecRuns(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := fixture.UniqueID(t)
	b := fixture.NewBundle(t)
	noPidNamespace(t, b)
	evs, _ := startAndWait(t, d, id, b)
	pid := addProcess(t, d, execReq(id, "e1", "sleep", "forever"))
	evs.Expect("start-process " + id + " e1")
	start := time.Now()
	signal(t, d, id, "init", syscall.SIGTERM)
	evs.Expect("exit "+id+" e1 137", "exit "+id+" init 143")
	if took := time.Since(start); took > promptly {
		t.Errorf("the exits took %s, want them promptly", took)
	}
	waitDead(t, pid)
}

// TestUpdateContainer: pause and resume (events, State status), and a
// resource update that reaches the container's cgroup without an event.
func TestUpdateContainer(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := fixture.UniqueID(t)
	evs, _ := startAndWait(t, d, id, fixture.NewBundle(t))

	if _, err := d.Client.UpdateContainer(ctxT(t), &types.UpdateContainerRequest{Id: id, Pid: "init", Status: "paused"}); err != nil {
		t.Fatalf("pause: %v", err)
	}
	evs.Expect("pause " + id)
	if st := state(t, d, id).Status; st != "paused" {
		t.Fatalf("State after pause: %q, want paused", st)
	}
	// Pausing a paused container is the runtime's error; nothing changes.
	if _, err := d.Client.UpdateContainer(ctxT(t), &types.UpdateContainerRequest{Id: id, Status: "paused"}); err == nil {
		t.Error("pausing a paused container succeeded")
	}
	if _, err := d.Client.UpdateContainer(ctxT(t), &types.UpdateContainerRequest{Id: id, Pid: "init", Status: "running"}); err != nil {
		t.Fatalf("resume: %v", err)
	}
	resumed := evs.Expect("resume " + id)[0]
	if st := state(t, d, id).Status; st != "running" {
		t.Fatalf("State after resume: %q, want running", st)
	}

	const limit = 48 << 20
	pid := initPid(t, d, id)
	file := memoryCgroupFile(t, pid, "memory.limit_in_bytes")
	_, err := d.Client.UpdateContainer(ctxT(t), &types.UpdateContainerRequest{Id: id, Resources: &types.UpdateResource{MemoryLimit: limit}})
	if err != nil {
		t.Fatalf("update memory limit: %v", err)
	}
	if got := readTrim(t, file); got != strconv.Itoa(limit) {
		t.Fatalf("%s = %s after the update, want %d", file, got, limit)
	}
	// A resource update publishes nothing (docs/api.md section 4).
	if evs := storedSince(t, d, resumed.Timestamp, id); len(evs) != 0 {
		t.Fatalf("events after the resource update: %q", describeAll(evs))
	}
	// Empty status and no resources: a no-op.
	if _, err := d.Client.UpdateContainer(ctxT(t), &types.UpdateContainerRequest{Id: id}); err != nil {
		t.Fatalf("empty update: %v", err)
	}
	signal(t, d, id, "init", syscall.SIGKILL)
	evs.Expect("exit " + id + " init 137")
}

// TestUpdateProcess: closing stdin ends a `cat` container once the client
// closed its end too; resizing a tty process reaches its pty.
func TestUpdateProcess(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)

	t.Run("close stdin", func(t *testing.T) {
		id := fixture.UniqueID(t)
		dir := t.TempDir()
		stdin, in := fifo(t, dir, "stdin")
		stdout, out := fifo(t, dir, "stdout")
		stderr, _ := fifo(t, dir, "stderr")
		evs := d.SubscribeAfter(time.Now(), id)
		createReq(t, d, &types.CreateContainerRequest{Id: id, BundlePath: fixture.NewBundle(t, fixture.Args("cat")).Path,
			Stdin: stdin, Stdout: stdout, Stderr: stderr})
		evs.Expect("start-container " + id)
		if _, err := in.WriteString("hello through cat\n"); err != nil {
			t.Fatal(err)
		}
		readUntil(t, out, "hello through cat\n")
		in.Close()
		if st := state(t, d, id).Status; st != "running" {
			t.Fatalf("cat stopped before its stdin was closed: %s", st)
		}
		if _, err := d.Client.UpdateProcess(ctxT(t), &types.UpdateProcessRequest{Id: id, Pid: "init", CloseStdin: true}); err != nil {
			t.Fatalf("UpdateProcess closeStdin: %v", err)
		}
		evs.Expect("exit " + id + " init 0")
	})

	t.Run("resize", func(t *testing.T) {
		id := fixture.UniqueID(t)
		stdout, out := fifo(t, t.TempDir(), "stdout")
		evs := d.SubscribeAfter(time.Now(), id)
		createReq(t, d, &types.CreateContainerRequest{Id: id, Stdout: stdout,
			BundlePath: fixture.NewBundle(t, fixture.Terminal(), fixture.Args("winsize")).Path})
		evs.Expect("start-container " + id)
		readUntil(t, out, "winsize ")
		if _, err := d.Client.UpdateProcess(ctxT(t), &types.UpdateProcessRequest{Id: id, Pid: "init", Width: 123, Height: 45}); err != nil {
			t.Fatalf("UpdateProcess resize: %v", err)
		}
		readUntil(t, out, "winsize 45x123")
		// A resize of a process without a pty is harmlessly ignored.
		addProcess(t, d, execReq(id, "notty", "sleep", "forever"))
		evs.Expect("start-process " + id + " notty")
		if _, err := d.Client.UpdateProcess(ctxT(t), &types.UpdateProcessRequest{Id: id, Pid: "notty", Width: 80, Height: 24}); err != nil {
			t.Fatalf("resize of a process without a pty: %v", err)
		}
		signal(t, d, id, "init", syscall.SIGKILL)
		evs.Expect("exit "+id+" notty 137", "exit "+id+" init 137")
	})
}

// TestStats: a running container's stats show its memory and its pids.
func TestStats(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := fixture.UniqueID(t)
	stdout, out := fifo(t, t.TempDir(), "stdout")
	evs := d.SubscribeAfter(time.Now(), id)
	createReq(t, d, &types.CreateContainerRequest{Id: id, Stdout: stdout,
		BundlePath: fixture.NewBundle(t, fixture.Args("alloc", "8", "--", "sleep", "forever")).Path})
	evs.Expect("start-container " + id)
	readUntil(t, out, "allocated 8 MiB")

	st, err := d.Client.Stats(ctxT(t), &types.StatsRequest{Id: id})
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	cg := st.GetCgroupStats()
	if usage := cg.GetMemoryStats().GetUsage().GetUsage(); usage < 8<<20 {
		t.Errorf("memory usage %d, want at least the 8 MiB the init holds", usage)
	}
	if n := cg.GetPidsStats().GetCurrent(); n == 0 {
		t.Errorf("pids current %d, want > 0", n)
	}
	if cg.GetCpuStats().GetCpuUsage().GetTotalUsage() == 0 {
		t.Error("cpu total usage 0")
	}
	if st.Timestamp == nil || time.Since(st.Timestamp.AsTime()) > time.Minute {
		t.Errorf("stats timestamp %v", st.Timestamp)
	}
	signal(t, d, id, "init", syscall.SIGKILL)
	evs.Expect("exit " + id + " init 137")
}

// TestCheckpoints: ListCheckpoint's v0.2 not-found answer, and (where criu
// works) create, list and delete.
func TestCheckpoints(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	_, err := d.Client.ListCheckpoint(ctxT(t), &types.ListCheckpointRequest{Id: "no-such-container"})
	wantErr(t, "ListCheckpoint of an unknown id", err, codes.NotFound, "no such containers")

	t.Run("create-list-delete", func(t *testing.T) {
		fixture.RequireCRIU(t)
		id := fixture.UniqueID(t)
		b := fixture.NewBundle(t)
		evs, _ := startAndWait(t, d, id, b)
		cp := &types.Checkpoint{Name: "cp1"}
		if _, err := d.Client.CreateCheckpoint(ctxT(t), &types.CreateCheckpointRequest{Id: id, Checkpoint: cp}); err != nil {
			t.Fatalf("CreateCheckpoint: %v", err)
		}
		if _, err := os.Stat(filepath.Join(b.Path, "checkpoints", "cp1", "config.json")); err != nil {
			t.Fatalf("checkpoint on disk: %v", err)
		}
		list, err := d.Client.ListCheckpoint(ctxT(t), &types.ListCheckpointRequest{Id: id})
		if err != nil || len(list.Checkpoints) != 1 || list.Checkpoints[0].Name != "cp1" {
			t.Fatalf("ListCheckpoint: %v, %v", list, err)
		}
		if _, err := d.Client.DeleteCheckpoint(ctxT(t), &types.DeleteCheckpointRequest{Id: id, Name: "cp1"}); err != nil {
			t.Fatalf("DeleteCheckpoint: %v", err)
		}
		list, err = d.Client.ListCheckpoint(ctxT(t), &types.ListCheckpointRequest{Id: id})
		if err != nil || len(list.Checkpoints) != 0 {
			t.Fatalf("ListCheckpoint after delete: %v, %v", list, err)
		}
		if st := state(t, d, id).Status; st != "running" {
			t.Fatalf("container %s after a checkpoint without exit", st)
		}
		signal(t, d, id, "init", syscall.SIGKILL)
		evs.Expect("exit " + id + " init 137")
	})
}
