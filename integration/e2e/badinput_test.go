package e2e

import (
	"context"
	"io"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/supervisor/journal"
)

// badCase is one RPC with bad input and the answer it must get. A message
// starting with "~" is a substring; otherwise it is the exact text.
type badCase struct {
	name string
	call func(ctx context.Context, c types.APIClient) error
	code codes.Code
	msg  string
}

// recvOnce opens an event stream and returns the outcome of reading it to
// its end: nil for a stored-only stream ending with EOF, else the error.
func recvAll(ctx context.Context, c types.APIClient, req *types.EventsRequest) error {
	stream, err := c.Events(ctx, req)
	if err != nil {
		return err
	}
	for {
		if _, err := stream.Recv(); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

// dirTree lists every directory under root (relative paths), plus every
// file directly in root.
func dirTree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if de.IsDir() || filepath.Dir(rel) == "." {
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBadInput: every RPC given bad input answers a clear error with the
// right code (the v0.2 text where docs/api.md 3.0 has one), and the daemon
// stays up and unchanged: same State, no new state dir entries, no event.
func TestBadInput(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	live := fixture.UniqueID(t)
	good := fixture.NewBundle(t)
	evs, _ := startAndWait(t, d, live, good)
	addProcess(t, d, execReq(live, "ex", "sleep", "forever"))
	last := evs.Expect("start-process " + live + " ex")[0]

	dir := t.TempDir()
	noConfig := filepath.Join(dir, "no-config")
	badJSON := filepath.Join(dir, "bad-json")
	notObject := filepath.Join(dir, "not-object")
	fifoCfg := filepath.Join(dir, "fifo-config")
	zeroCfg := filepath.Join(dir, "zero-config")
	bigCfg := filepath.Join(dir, "big-config")
	for _, p := range []string{noConfig, badJSON, notObject, fifoCfg, zeroCfg, bigCfg} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(badJSON, "config.json"), []byte("{not json"), 0o644)
	os.WriteFile(filepath.Join(notObject, "config.json"), []byte(`"a string"`), 0o644)
	unix.Mkfifo(filepath.Join(fifoCfg, "config.json"), 0o600)
	os.Symlink("/dev/zero", filepath.Join(zeroCfg, "config.json"))
	os.WriteFile(filepath.Join(bigCfg, "config.json"), make([]byte, 5<<20), 0o644)
	aFile := filepath.Join(dir, "a-file")
	os.WriteFile(aFile, nil, 0o644)
	noProcess := fixture.NewBundle(t)
	noProcess.Spec.Process = nil
	noProcess.Write(t)
	badExe := fixture.NewBundle(t, fixture.RawArgs("/no/such/binary"))
	badExeID := fixture.UniqueID(t) + "-badexe"

	// Host files the stdio fields name: none may be written, truncated or
	// created (checked at the end).
	hostFile := filepath.Join(dir, "host-file")
	os.WriteFile(hostFile, []byte("precious host data\n"), 0o644)
	fifoPath, _ := fifo(t, dir, "a-fifo")
	link := filepath.Join(dir, "link-to-fifo")
	os.Symlink(fifoPath, link)
	journalFile := filepath.Join(d.JournalDir, journal.SegmentFile(1))
	notCreated := filepath.Join(dir, "stdin-never-created")
	hostFiles := snapshotFiles(t, hostFile, journalFile, link)

	long := strings.Repeat("a", 300)
	huge := strings.Repeat("x", 1<<20)
	tooBig := strings.Repeat("x", 5<<20)
	stateDir := d.StateDir
	notFound := "containerd: container not found"
	noProc := "containerd: process not found for container"

	createC := func(req *types.CreateContainerRequest) func(context.Context, types.APIClient) error {
		return func(ctx context.Context, c types.APIClient) error { _, err := c.CreateContainer(ctx, req); return err }
	}
	execP := func(req *types.AddProcessRequest) func(context.Context, types.APIClient) error {
		return func(ctx context.Context, c types.APIClient) error { _, err := c.AddProcess(ctx, req); return err }
	}
	sig := func(req *types.SignalRequest) func(context.Context, types.APIClient) error {
		return func(ctx context.Context, c types.APIClient) error { _, err := c.Signal(ctx, req); return err }
	}
	update := func(req *types.UpdateContainerRequest) func(context.Context, types.APIClient) error {
		return func(ctx context.Context, c types.APIClient) error { _, err := c.UpdateContainer(ctx, req); return err }
	}
	updateProc := func(req *types.UpdateProcessRequest) func(context.Context, types.APIClient) error {
		return func(ctx context.Context, c types.APIClient) error { _, err := c.UpdateProcess(ctx, req); return err }
	}
	stateOf := func(id string) func(context.Context, types.APIClient) error {
		return func(ctx context.Context, c types.APIClient) error {
			_, err := c.State(ctx, &types.StateRequest{Id: id})
			return err
		}
	}
	stats := func(id string) func(context.Context, types.APIClient) error {
		return func(ctx context.Context, c types.APIClient) error {
			_, err := c.Stats(ctx, &types.StatsRequest{Id: id})
			return err
		}
	}
	cpCreate := func(req *types.CreateCheckpointRequest) func(context.Context, types.APIClient) error {
		return func(ctx context.Context, c types.APIClient) error { _, err := c.CreateCheckpoint(ctx, req); return err }
	}
	cpDelete := func(req *types.DeleteCheckpointRequest) func(context.Context, types.APIClient) error {
		return func(ctx context.Context, c types.APIClient) error { _, err := c.DeleteCheckpoint(ctx, req); return err }
	}
	cpList := func(req *types.ListCheckpointRequest) func(context.Context, types.APIClient) error {
		return func(ctx context.Context, c types.APIClient) error { _, err := c.ListCheckpoint(ctx, req); return err }
	}
	events := func(req *types.EventsRequest) func(context.Context, types.APIClient) error {
		return func(ctx context.Context, c types.APIClient) error { return recvAll(ctx, c, req) }
	}
	user := &types.User{}

	// runc 1.0.0-rc2 writes its message to its stderr only, never to its
	// log: without a stderr path from the client the shim has no message
	// to pass on but what it captures of runc's stderr.
	missingExe := "~/no/such/binary"
	if fixture.OldRuntime() {
		missingExe = "~oci runtime error: "
	}
	cases := []badCase{
		// CreateContainer: ids, bundles, values.
		{"create: empty bundle", createC(&types.CreateContainerRequest{Id: "x"}), codes.InvalidArgument, "empty bundle path"},
		{"create: id in use", createC(&types.CreateContainerRequest{Id: live, BundlePath: good.Path}), codes.AlreadyExists,
			"mkdir " + filepath.Join(stateDir, live) + ": file exists"},
		{"create: no config.json", createC(&types.CreateContainerRequest{Id: "nocfg", BundlePath: noConfig}), codes.NotFound,
			"open " + noConfig + "/config.json: no such file or directory"},
		{"create: missing bundle dir", createC(&types.CreateContainerRequest{Id: "nodir", BundlePath: "/no/such/bundle"}), codes.NotFound,
			"open /no/such/bundle/config.json: no such file or directory"},
		{"create: bundle is a file", createC(&types.CreateContainerRequest{Id: "file", BundlePath: aFile}), codes.InvalidArgument, "~" + aFile},
		{"create: invalid JSON", createC(&types.CreateContainerRequest{Id: "badjson", BundlePath: badJSON}), codes.InvalidArgument, "~config.json"},
		{"create: JSON not an object", createC(&types.CreateContainerRequest{Id: "notobj", BundlePath: notObject}), codes.InvalidArgument, "~config.json"},
		{"create: no process in config.json", createC(&types.CreateContainerRequest{Id: "noproc", BundlePath: noProcess.Path}), codes.InvalidArgument, "~process"},
		{"create: config.json a FIFO", createC(&types.CreateContainerRequest{Id: "fifocfg", BundlePath: fifoCfg}), codes.InvalidArgument,
			fifoCfg + "/config.json: not a regular file (p---------): invalid argument"},
		{"create: config.json /dev/zero", createC(&types.CreateContainerRequest{Id: "zerocfg", BundlePath: zeroCfg}), codes.InvalidArgument,
			zeroCfg + "/config.json: not a regular file (Dc---------): invalid argument"},
		{"create: config.json of 5 MiB", createC(&types.CreateContainerRequest{Id: "bigcfg", BundlePath: bigCfg}), codes.InvalidArgument,
			bigCfg + "/config.json: larger than the 4194304-byte limit: invalid argument"},
		{"create: relative bundle", createC(&types.CreateContainerRequest{Id: "rel", BundlePath: "relative/bundle"}), codes.InvalidArgument, "~relative/bundle"},
		{"create: missing executable", createC(&types.CreateContainerRequest{Id: badExeID, BundlePath: badExe.Path}), codes.Internal,
			"~oci runtime error: "},
		{"create: unknown runtime", createC(&types.CreateContainerRequest{Id: "rt", BundlePath: good.Path, Runtime: "/no/such/runc"}), codes.Internal, "~/no/such/runc"},
		{"create: checkpoint ../x", createC(&types.CreateContainerRequest{Id: "cp", BundlePath: good.Path, Checkpoint: "../x"}), codes.InvalidArgument, "~invalid id"},
		{"create: 1 MiB label", createC(&types.CreateContainerRequest{Id: "label", BundlePath: good.Path, Labels: []string{huge}}), codes.InvalidArgument, "~labels: "},
		{"create: 300 empty labels", createC(&types.CreateContainerRequest{Id: "label", BundlePath: good.Path, Labels: make([]string, 300)}),
			codes.InvalidArgument, "~labels: 300 of them, more than the 256 allowed"},
		{"create: 1.9 million empty labels", createC(&types.CreateContainerRequest{Id: "label", BundlePath: good.Path, Labels: make([]string, 1_900_000)}),
			codes.InvalidArgument, "~labels: 1900000 of them"},
		{"create: relative checkpointDir", createC(&types.CreateContainerRequest{Id: "cpdir", BundlePath: good.Path, Checkpoint: "c", CheckpointDir: "cps"}),
			codes.InvalidArgument, "~not an absolute path"},
		{"create: 5 MiB label", createC(&types.CreateContainerRequest{Id: "label", BundlePath: good.Path, Labels: []string{tooBig}}), codes.ResourceExhausted, "~larger than max"},

		// Stdio paths: an output never names an existing file; stdin is never created.
		{"create: stdout a host file", createC(&types.CreateContainerRequest{Id: "out", BundlePath: good.Path, Stdout: hostFile}),
			codes.InvalidArgument, "~stdout \"" + hostFile + "\" is an existing regular file"},
		{"create: stderr the daemon's journal", createC(&types.CreateContainerRequest{Id: "out", BundlePath: good.Path, Stderr: journalFile}),
			codes.InvalidArgument, "~stderr \"" + journalFile + "\" is an existing regular file"},
		{"create: stdout a symlink", createC(&types.CreateContainerRequest{Id: "out", BundlePath: good.Path, Stdout: link}),
			codes.InvalidArgument, "~stdout \"" + link + "\" is a symlink"},
		{"create: stdout a directory", createC(&types.CreateContainerRequest{Id: "out", BundlePath: good.Path, Stdout: dir}),
			codes.InvalidArgument, "~stdout \"" + dir + "\" is a directory"},
		{"create: relative stdout", createC(&types.CreateContainerRequest{Id: "out", BundlePath: good.Path, Stdout: "out.log"}),
			codes.InvalidArgument, "~stdout \"out.log\" is not an absolute path"},
		{"create: stdin missing", createC(&types.CreateContainerRequest{Id: "in", BundlePath: good.Path, Stdin: notCreated}),
			codes.InvalidArgument, "~stdin \"" + notCreated + "\": "},
		{"create: stdin a directory", createC(&types.CreateContainerRequest{Id: "in", BundlePath: good.Path, Stdin: dir}),
			codes.InvalidArgument, "~stdin \"" + dir + "\" is a directory"},
		{"exec: stdout a host file", execP(&types.AddProcessRequest{Id: live, Pid: "out", Args: []string{"/testinit"}, Cwd: "/", User: user,
			Stdout: hostFile}), codes.InvalidArgument, "~stdout \"" + hostFile + "\" is an existing regular file"},
		{"exec: stderr the daemon's journal", execP(&types.AddProcessRequest{Id: live, Pid: "out", Args: []string{"/testinit"}, Cwd: "/", User: user,
			Stderr: journalFile}), codes.InvalidArgument, "~stderr \"" + journalFile + "\" is an existing regular file"},

		// State and Stats.
		{"state: unknown id", stateOf("no-such"), codes.NotFound, notFound},
		{"stats: unknown id", stats("no-such"), codes.NotFound, notFound},

		// Signal.
		{"signal: unknown id", sig(&types.SignalRequest{Id: "no-such", Pid: "init", Signal: 9}), codes.NotFound, notFound},
		{"signal: unknown pid", sig(&types.SignalRequest{Id: live, Pid: "no-such", Signal: 9}), codes.NotFound, noProc},
		{"signal: empty pid", sig(&types.SignalRequest{Id: live, Signal: 9}), codes.NotFound, noProc},
		{"signal: number 999", sig(&types.SignalRequest{Id: live, Pid: "init", Signal: 999}), codes.InvalidArgument, "~invalid signal"},

		// UpdateContainer.
		{"update: unknown id", update(&types.UpdateContainerRequest{Id: "no-such", Status: "paused"}), codes.NotFound, notFound},
		{"update: unknown status", update(&types.UpdateContainerRequest{Id: live, Status: "frozen"}), codes.InvalidArgument, "containerd: unknown container status "},
		{"update: memory limit > MaxInt64", update(&types.UpdateContainerRequest{Id: live, Resources: &types.UpdateResource{MemoryLimit: 1 << 63}}),
			codes.InvalidArgument, "~memoryLimit"},
		{"update: blkio weight 70000", update(&types.UpdateContainerRequest{Id: live, Resources: &types.UpdateResource{BlkioWeight: 70000}}),
			codes.InvalidArgument, "~blkioWeight"},
		{"update: weight device without device", update(&types.UpdateContainerRequest{Id: live, Resources: &types.UpdateResource{
			BlkioWeightDevice: []*types.WeightDevice{{Weight: 10}}}}), codes.InvalidArgument, "~blkIODevice is missing"},
		{"update: bad cpuset", update(&types.UpdateContainerRequest{Id: live, Resources: &types.UpdateResource{CpusetCpus: "garbage"}}),
			codes.FailedPrecondition, "~garbage"},

		// UpdateProcess.
		{"update process: unknown id", updateProc(&types.UpdateProcessRequest{Id: "no-such", Pid: "init", CloseStdin: true}), codes.NotFound, notFound},
		{"update process: unknown pid", updateProc(&types.UpdateProcessRequest{Id: live, Pid: "no-such", Width: 10, Height: 10}), codes.NotFound, noProc},

		// AddProcess.
		{"exec: no user", execP(&types.AddProcessRequest{Id: live, Pid: "p", Args: []string{"/testinit"}, Cwd: "/"}), codes.InvalidArgument, "process user cannot be empty"},
		{"exec: empty id", execP(&types.AddProcessRequest{Pid: "p", Args: []string{"/testinit"}, Cwd: "/", User: user}), codes.InvalidArgument, "container id cannot be empty"},
		{"exec: empty pid", execP(&types.AddProcessRequest{Id: live, Args: []string{"/testinit"}, Cwd: "/", User: user}), codes.InvalidArgument, "process id cannot be empty"},
		{"exec: unknown container", execP(execReq("no-such", "p", "exit", "0")), codes.NotFound, notFound},
		{"exec: pid init", execP(execReq(live, "init", "exit", "0")), codes.AlreadyExists, "mkdir " + filepath.Join(stateDir, live, "init") + ": file exists"},
		{"exec: pid in use", execP(execReq(live, "ex", "exit", "0")), codes.AlreadyExists, "mkdir " + filepath.Join(stateDir, live, "ex") + ": file exists"},
		{"exec: no args", execP(&types.AddProcessRequest{Id: live, Pid: "noargs", Cwd: "/", User: user}), codes.Internal, "~oci runtime error: "},
		{"exec: relative cwd", execP(&types.AddProcessRequest{Id: live, Pid: "relcwd", Args: []string{"/testinit"}, Cwd: "tmp", User: user}),
			codes.Internal, "~oci runtime error: "},
		{"exec: missing executable", execP(&types.AddProcessRequest{Id: live, Pid: "noexe", Args: []string{"/no/such/binary"}, Cwd: "/", User: user}),
			codes.Internal, missingExe},
		{"exec: 1 MiB argument", execP(execReq(live, "bigarg", "echo", huge)), codes.InvalidArgument, "~args[2]: 1048576 bytes"},
		{"exec: 1 MiB env", execP(&types.AddProcessRequest{Id: live, Pid: "bigenv", Args: []string{"/testinit"}, Cwd: "/", User: user,
			Env: []string{"A=" + huge}}), codes.InvalidArgument, "~env[0]: "},
		{"exec: 300 KiB of args", execP(execReq(live, "bigargs", "echo", huge[:100<<10], huge[:100<<10], huge[:100<<10])), codes.InvalidArgument,
			"~args and env: "},
		{"exec: 5 MiB argument", execP(execReq(live, "bigarg", "echo", tooBig)), codes.ResourceExhausted, "~larger than max"},

		// Checkpoints.
		{"checkpoint create: no checkpoint", cpCreate(&types.CreateCheckpointRequest{Id: live}), codes.InvalidArgument, "checkpoint cannot be empty"},
		{"checkpoint create: empty name", cpCreate(&types.CreateCheckpointRequest{Id: live, Checkpoint: &types.Checkpoint{}}), codes.InvalidArgument,
			"checkpoint name cannot be empty"},
		{"checkpoint create: unknown id", cpCreate(&types.CreateCheckpointRequest{Id: "no-such", Checkpoint: &types.Checkpoint{Name: "c"}}), codes.NotFound, notFound},
		{"checkpoint create: name ../x", cpCreate(&types.CreateCheckpointRequest{Id: live, Checkpoint: &types.Checkpoint{Name: "../x"}}), codes.InvalidArgument, "~invalid id"},
		{"checkpoint create: name ..", cpCreate(&types.CreateCheckpointRequest{Id: live, Checkpoint: &types.Checkpoint{Name: ".."}}), codes.InvalidArgument, "~invalid id"},
		{"checkpoint delete: empty name", cpDelete(&types.DeleteCheckpointRequest{Id: live}), codes.InvalidArgument, "checkpoint name cannot be empty"},
		{"checkpoint delete: unknown id", cpDelete(&types.DeleteCheckpointRequest{Id: "no-such", Name: "c"}), codes.NotFound, notFound},
		{"checkpoint delete: name ..", cpDelete(&types.DeleteCheckpointRequest{Id: live, Name: ".."}), codes.InvalidArgument, "~invalid id"},
		{"checkpoint delete: name ../x", cpDelete(&types.DeleteCheckpointRequest{Id: live, Name: "../x"}), codes.InvalidArgument, "~invalid id"},
		{"checkpoint delete: missing one is success", cpDelete(&types.DeleteCheckpointRequest{Id: live, Name: "never-made"}), codes.OK, ""},
		{"checkpoint list: unknown id", cpList(&types.ListCheckpointRequest{Id: "no-such"}), codes.NotFound, "no such containers"},
		{"checkpoint list: no checkpoints dir", cpList(&types.ListCheckpointRequest{Id: live}), codes.NotFound,
			"open " + good.Path + "/checkpoints: no such file or directory"},
		{"checkpoint list: relative dir", cpList(&types.ListCheckpointRequest{Id: live, CheckpointDir: "relative"}), codes.InvalidArgument, "~not an absolute path"},
		{"checkpoint create: relative dir", cpCreate(&types.CreateCheckpointRequest{Id: live, Checkpoint: &types.Checkpoint{Name: "c"}, CheckpointDir: "rel"}),
			codes.InvalidArgument, "~not an absolute path"},
		{"checkpoint delete: relative dir", cpDelete(&types.DeleteCheckpointRequest{Id: live, Name: "c", CheckpointDir: "rel"}),
			codes.InvalidArgument, "~not an absolute path"},

		{"checkpoint delete: a host dir", cpDelete(&types.DeleteCheckpointRequest{Id: live, Name: "no-config", CheckpointDir: dir}),
			codes.FailedPrecondition, "~" + noConfig + " is not a checkpoint this daemon wrote"},
		{"checkpoint delete: the state dir", cpDelete(&types.DeleteCheckpointRequest{Id: live, Name: live, CheckpointDir: stateDir}),
			codes.FailedPrecondition, "~not a checkpoint this daemon wrote"},

		// Events.
		{"events: storedOnly without timestamp", events(&types.EventsRequest{StoredOnly: true}), codes.InvalidArgument,
			"invalid parameter: StoredOnly cannot be specified without setting a valid Timestamp"},
		{"events: storedOnly at 0001-01-01", events(&types.EventsRequest{StoredOnly: true, Timestamp: timestamppb.New(time.Time{})}), codes.InvalidArgument,
			"invalid parameter: StoredOnly cannot be specified without setting a valid Timestamp"},
		{"events: nanos out of range", events(&types.EventsRequest{StoredOnly: true, Timestamp: &timestamppb.Timestamp{Seconds: 1, Nanos: 2e9}}),
			codes.InvalidArgument, "~invalid timestamp"},
		{"events: year after 9999", events(&types.EventsRequest{StoredOnly: true, Timestamp: &timestamppb.Timestamp{Seconds: 1e15}}),
			codes.InvalidArgument, "~invalid timestamp"},
		{"events: year before 1", events(&types.EventsRequest{Timestamp: &timestamppb.Timestamp{Seconds: -1e12}}),
			codes.InvalidArgument, "~invalid timestamp"},
		{"events: afterSeq far ahead", events(&types.EventsRequest{StoredOnly: true, AfterSeq: math.MaxUint64}), codes.FailedPrecondition, "~is beyond the end of journal"}, // a cursor of another journal
	}

	// A checkpoint that fails (here: no CRIU) into dirs it had to make
	// outside the state dir leaves none of them (the decoy dir check).
	if _, err := exec.LookPath("criu"); err != nil {
		cases = append(cases, badCase{"checkpoint create: fails into new dirs outside", cpCreate(&types.CreateCheckpointRequest{Id: live,
			Checkpoint: &types.Checkpoint{Name: "c"}, CheckpointDir: filepath.Join(dir, "new", "deep")}), codes.FailedPrecondition, "~CRIU"})
	}

	// Every RPC that takes a container id, with each bad id: creating is
	// refused as invalid, everything else does not find the container.
	for _, id := range []string{"../x", "a/b", "..", ".", long, "a\x00b", "-x", ""} {
		q := strconv.Quote(short(id))
		cases = append(cases,
			badCase{"create: id " + q, createC(&types.CreateContainerRequest{Id: id, BundlePath: good.Path}), codes.InvalidArgument, "~invalid id"},
			badCase{"signal: id " + q, sig(&types.SignalRequest{Id: id, Pid: "init", Signal: 9}), codes.NotFound, notFound},
			badCase{"update: id " + q, update(&types.UpdateContainerRequest{Id: id, Status: "paused"}), codes.NotFound, notFound},
			badCase{"update process: id " + q, updateProc(&types.UpdateProcessRequest{Id: id, Pid: "init", CloseStdin: true}), codes.NotFound, notFound},
			badCase{"stats: id " + q, stats(id), codes.NotFound, notFound},
			badCase{"checkpoint create: id " + q, cpCreate(&types.CreateCheckpointRequest{Id: id, Checkpoint: &types.Checkpoint{Name: "c"}}), codes.NotFound, notFound},
			badCase{"checkpoint delete: id " + q, cpDelete(&types.DeleteCheckpointRequest{Id: id, Name: "c"}), codes.NotFound, notFound},
			badCase{"checkpoint list: id " + q, cpList(&types.ListCheckpointRequest{Id: id}), codes.NotFound, "no such containers"},
		)
		if id != "" { // an empty id means all containers (State, Events) or is its own error (AddProcess)
			cases = append(cases,
				badCase{"state: id " + q, stateOf(id), codes.NotFound, notFound},
				badCase{"exec: container id " + q, execP(execReq(id, "p", "exit", "0")), codes.NotFound, notFound},
				badCase{"exec: process id " + q, execP(execReq(live, id, "exit", "0")), codes.InvalidArgument, "~invalid id"},
				badCase{"events: id " + q, events(&types.EventsRequest{StoredOnly: true, Timestamp: &timestamppb.Timestamp{}, Id: id}), codes.OK, ""},
			)
		}
	}

	before := state(t, d, live)
	treeBefore := dirTree(t, d.StateDir)
	decoyBefore := dirTree(t, dir)
	pid := d.Pid()
	for _, tc := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
		err := tc.call(ctx, d.Client)
		cancel()
		if tc.code == codes.OK {
			if err != nil {
				t.Errorf("%s: %v, want success", tc.name, err)
			}
			continue
		}
		wantErr(t, tc.name, err, tc.code, tc.msg)
		if !d.Running() {
			t.Fatalf("%s: the daemon died:\n%s", tc.name, d.Log.String())
		}
	}

	// The daemon is up and unchanged.
	if !d.Running() || d.Pid() != pid || syscall.Kill(pid, 0) != nil {
		t.Fatal("the daemon is not running any more")
	}
	after := state(t, d, live)
	if after.Status != "running" || !slices.Equal(after.Pids, before.Pids) || len(after.Processes) != 2 ||
		process(after, "ex").GetSystemPid() != process(before, "ex").GetSystemPid() {
		t.Errorf("container after the bad input: status %s pids %v, %d processes; before: %s %v",
			after.Status, after.Pids, len(after.Processes), before.Status, before.Pids)
	}
	if all, err := d.Client.State(ctxT(t), &types.StateRequest{}); err != nil || len(all.Containers) != 1 {
		var ids []string
		for _, c := range all.GetContainers() {
			ids = append(ids, c.Id)
		}
		t.Errorf("State after the bad input: %q, %v; want only %s", ids, err, live)
	}
	if treeAfter := dirTree(t, d.StateDir); !slices.Equal(treeAfter, treeBefore) {
		t.Errorf("state dir changed:\nbefore %q\nafter  %q", treeBefore, treeAfter)
	}
	if evs := storedSince(t, d, last.Timestamp, ""); len(evs) != 0 {
		t.Errorf("events published by the bad input: %q", describeAll(evs))
	}
	if _, err := os.Stat(filepath.Join(good.Path, "config.json")); err != nil {
		t.Errorf("the bundle was damaged: %v", err)
	}
	if decoyAfter := dirTree(t, dir); !slices.Equal(decoyAfter, decoyBefore) {
		t.Errorf("the dir the bad input named changed:\nbefore %q\nafter  %q", decoyBefore, decoyAfter)
	}
	if now := snapshotFiles(t, hostFile, journalFile, link); !hostFilesSame(hostFiles, now, journalFile) {
		t.Errorf("host files named by the bad input changed:\nbefore %v\nafter  %v", hostFiles, now)
	}
	if _, err := os.Lstat(notCreated); err == nil {
		t.Errorf("stdin %s was created", notCreated)
	}

	// A failed start leaves its id free at once.
	create(t, d, badExeID, good)
	evs2 := d.SubscribeAfter(last.Timestamp.AsTime(), badExeID)
	evs2.Expect("start-container " + badExeID)
	signal(t, d, badExeID, "init", syscall.SIGKILL)
	evs2.Expect("exit " + badExeID + " init 137")
	signal(t, d, live, "init", syscall.SIGKILL)
	evs.Expect("exit "+live+" ex 137", "exit "+live+" init 137")
}

// fileFacts is what a write, truncation or replacement of a file changes.
type fileFacts struct {
	Size  int64
	Mode  fs.FileMode
	Inode uint64
	Head  string
}

func snapshotFiles(t *testing.T, paths ...string) map[string]fileFacts {
	t.Helper()
	out := map[string]fileFacts{}
	for _, p := range paths {
		st, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		f := fileFacts{Size: st.Size(), Mode: st.Mode(), Inode: st.Sys().(*syscall.Stat_t).Ino}
		if st.Mode().IsRegular() {
			data, _ := os.ReadFile(p)
			f.Head = string(data[:min(len(data), 64)])
		}
		out[p] = f
	}
	return out
}

// hostFilesSame compares two snapshots; the journal may only have grown
// (the test's own events; too few to compact it), from the same first bytes.
func hostFilesSame(a, b map[string]fileFacts, journal string) bool {
	for p, fa := range a {
		fb := b[p]
		if p == journal {
			if fb.Size < fa.Size || fb.Head != fa.Head {
				return false
			}
			continue
		}
		if fa != fb {
			return false
		}
	}
	return true
}
