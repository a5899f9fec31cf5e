package reliability

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/bench/internal/harness"
	"github.com/evjournal/containerd/integration/fixture"
)

// Answer classes: the codes a bad request may get.
var (
	invalid  = []codes.Code{codes.InvalidArgument}
	notFound = []codes.Code{codes.NotFound}
	exists   = []codes.Code{codes.AlreadyExists}
	// lookup: an id no container can have is either rejected or not found.
	lookup = []codes.Code{codes.InvalidArgument, codes.NotFound}
	// failed: a request that reached runc or the file system and failed
	// there (runc's own message comes back as Internal, as in v0.2).
	failed = []codes.Code{codes.InvalidArgument, codes.NotFound, codes.FailedPrecondition, codes.AlreadyExists,
		codes.Internal, codes.OutOfRange, codes.PermissionDenied}
	// anyAnswer: a well-formed request that may succeed (a filter that
	// matches nothing, say); only a hang or a crash is wrong.
	anyAnswer []codes.Code
)

type badCase struct {
	rpc, name string
	want      []codes.Code // nil: any answer, success included
	call      func(ctx context.Context, c types.APIClient) error
}

// badIDs are ids no container may have.
var badIDs = []string{"", ".", "..", "../x", "../../etc", "a/b", "/abs", ".hidden", "x\x00y", "with space", "ü",
	"new\nline", strings.Repeat("a", 77), strings.Repeat("b", 1<<20)}

func short(s string) string {
	if len(s) > 20 {
		return fmt.Sprintf("%q...(%d bytes)", s[:12], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// badInput sends the table of bad requests to every RPC while other
// containers pause and resume, then checks that the daemon is the same
// process, lists the same containers and processes, holds the same state
// dirs and runc containers, and journaled nothing but the load's events.
func (s *Suite) badInput() error {
	d, err := s.env.NewDaemon("badinput")
	if err != nil {
		return err
	}
	if err := d.Start(); err != nil {
		return err
	}
	bundles, err := s.badBundles()
	if err != nil {
		return err
	}
	ctx := context.Background()
	victim, load0, load1 := s.env.ID("victim"), s.env.ID("load0"), s.env.ID("load1")
	for _, id := range []string{victim, load0, load1} {
		if _, err := d.Client.CreateContainer(ctx, &types.CreateContainerRequest{Id: id, BundlePath: bundles["good"]}); err != nil {
			return err
		}
	}
	if _, err := d.Client.AddProcess(ctx, execReq(victim, "e1", "sleep", "forever")); err != nil {
		return err
	}
	host, err := newHostPaths(s.env, d)
	if err != nil {
		return err
	}
	before, err := snapshot(s.env, d)
	if err != nil {
		return err
	}
	stateBefore, err := timeState(d)
	if err != nil {
		return err
	}
	pid := d.Pid()
	table := append(badTable(bundles, victim, s.env.ID), host.table(bundles["good"], victim, s.env.ID)...)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	loaded := []string{load0, load1}
	load := &loadExits{}
	harness.Repeat(len(loaded), stop, &wg, func(i int) bool {
		for _, st := range []string{"paused", "running"} {
			d.Client.UpdateContainer(ctx, &types.UpdateContainerRequest{Id: loaded[i], Status: st})
		}
		load.exec(ctx, d, loaded[i])
		return true
	})
	probes := harness.ProbeLoop(d, victim, stop, &wg)

	calls, unexpected := 0, 0
	rpcs := map[string]bool{}
	t0 := time.Now()
	for pass := 0; pass == 0 || time.Since(t0) < s.cfg.BadInputLoad; pass++ {
		for _, c := range table {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := c.call(cctx, d.Client)
			cancel()
			calls++
			rpcs[c.rpc] = true
			if os.Getenv("BADINPUT_VERBOSE") != "" && pass == 0 {
				s.cfg.Logf("bad input %s %s: %s", c.rpc, c.name, clip(fmt.Sprint(err)))
			}
			if why := judge(err, c.want); why != "" {
				unexpected++
				if pass == 0 {
					s.cfg.Logf("bad input %s %s: %s", c.rpc, c.name, why)
				}
			}
			if !d.Alive() {
				close(stop)
				wg.Wait()
				return fmt.Errorf("daemon died on %s %s; log tail:\n%s", c.rpc, c.name, d.LogTail(20))
			}
		}
	}
	close(stop)
	wg.Wait()

	alive := d.Alive() && d.Pid() == pid
	if _, err := d.Client.GetServerVersion(ctx, &types.GetServerVersionRequest{}); err != nil {
		alive = false
	}
	// Cleanup of a refused request may finish just after its answer: give
	// the differences 5 s to go away.
	var diffs []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		after, err := snapshot(s.env, d)
		if err != nil {
			return err
		}
		if diffs = before.diff(after); len(diffs) == 0 || time.Now().After(deadline) {
			break
		}
	}
	changed := len(diffs)
	for _, diff := range diffs {
		s.cfg.Logf("bad input changed the state: %s", diff)
	}
	if changed > 0 {
		for _, l := range strings.Split(d.LogTail(400), "\n") {
			if strings.Contains(l, "level=error") {
				s.cfg.Logf("  daemon: %s", clip(l))
			}
		}
	}
	evs, err := harness.StoredEvents(ctx, d.Client)
	if err != nil {
		return err
	}
	for _, ev := range evs {
		if ev.Seq > before.lastSeq && ev.Id != load0 && ev.Id != load1 {
			changed++
			s.cfg.Logf("bad input journaled an event: %s %s %s %d", ev.Type, short(ev.Id), ev.Pid, ev.Status)
		}
	}
	s.line("bad_input_calls", float64(calls), "calls")
	s.line("bad_input_rpcs_covered", float64(len(rpcs)), "rpcs")
	s.zero("bad_input_unexpected_answers", unexpected, "calls")
	s.Report.Line("bad_input_daemon_alive", b2f(alive), "bool")
	if !alive {
		s.failf("daemon not alive (or restarted) after the bad-input table")
	}
	s.zero("bad_input_state_changed", changed, "differences")
	s.zero("bad_input_host_changes", s.logAll("bad input wrote outside the daemon's dirs", host.changes()), "changes")
	s.line("bad_input_load_execs", float64(len(load.started)), "processes")
	s.zero("bad_input_load_exits_not_once", s.logAll("load exit", load.check(ctx, d)), "processes")
	stateAfter, err := timeState(d)
	if err != nil {
		return err
	}
	s.line("bad_input_state_ms_before", stateBefore, "ms")
	s.line("bad_input_state_ms_after", stateAfter, "ms")
	if stateAfter > 1000 && stateAfter > 10*stateBefore {
		s.failf("State took %.0f ms after the bad-input table, %.0f ms before", stateAfter, stateBefore)
	}
	s.line("bad_input_loop_p99_ms", harness.Percentile(*probes, 99), "ms")
	return nil
}

// clip shortens s for a log line.
func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + fmt.Sprintf("...(%d bytes)", len(s))
	}
	return s
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// judge explains why err is not an acceptable answer ("" when it is).
func judge(err error, want []codes.Code) string {
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Sprintf("not a gRPC status: %v", err)
	}
	switch st.Code() {
	case codes.Unknown, codes.DeadlineExceeded, codes.Unavailable, codes.Canceled:
		return fmt.Sprintf("unclear answer %s: %s", st.Code(), clip(st.Message()))
	}
	if want == nil {
		return ""
	}
	if err == nil {
		return "accepted"
	}
	for _, c := range want {
		if st.Code() == c {
			if strings.TrimSpace(st.Message()) == "" {
				return "empty error message"
			}
			return ""
		}
	}
	return fmt.Sprintf("code %s (%s), want one of %v", st.Code(), clip(st.Message()), want)
}

// badBundles makes the bundles of the table: a good one and broken ones.
func (s *Suite) badBundles() (map[string]string, error) {
	good, err := s.env.Bundle("bad-good")
	if err != nil {
		return nil, err
	}
	out := map[string]string{"good": good}
	rootfs := filepath.Join(good, "rootfs")
	mk := func(name string, edit func(dir string) error) error {
		dir := s.env.Path("bundles", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		out[name] = dir
		return edit(dir)
	}
	steps := []struct {
		name string
		edit func(dir string) error
	}{
		{"empty", func(string) error { return nil }},
		{"garbage", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "config.json"), []byte("{not json"), 0o644)
		}},
		{"noargs", func(dir string) error {
			sp := fixture.DefaultSpec()
			sp.Root.Path = rootfs
			sp.Process.Args = nil
			return harness.WriteSpec(dir, sp)
		}},
		{"badexe", func(dir string) error {
			sp := fixture.DefaultSpec()
			sp.Root.Path = rootfs
			sp.Process.Args = []string{"/nonexistent"}
			return harness.WriteSpec(dir, sp)
		}},
		{"noroot", func(dir string) error {
			sp := fixture.DefaultSpec()
			sp.Root.Path = "/nonexistent-rootfs"
			return harness.WriteSpec(dir, sp)
		}},
		{"noprocess", func(dir string) error {
			sp := fixture.DefaultSpec()
			sp.Root.Path = rootfs
			sp.Process = nil
			return harness.WriteSpec(dir, sp)
		}},
		// config.json files that would block a worker or swamp the daemon
		// if read carelessly (docs/api.md 7.1).
		{"fifo", func(dir string) error { return unix.Mkfifo(filepath.Join(dir, "config.json"), 0o600) }},
		{"devzero", func(dir string) error { return os.Symlink("/dev/zero", filepath.Join(dir, "config.json")) }},
		{"oversized", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "config.json"), make([]byte, 8<<20), 0o644)
		}},
	}
	for _, st := range steps {
		if err := mk(st.name, st.edit); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func execReq(id, pid string, steps ...string) *types.AddProcessRequest {
	return &types.AddProcessRequest{Id: id, Pid: pid, User: &types.User{}, Args: append([]string{"/testinit"}, steps...),
		Cwd: "/", Env: []string{"PATH=/"}}
}

// badTable is the bad input of every RPC.
func badTable(b map[string]string, victim string, uniq func(string) string) []badCase {
	var t []badCase
	add := func(rpc, name string, want []codes.Code, call func(context.Context, types.APIClient) error) {
		t = append(t, badCase{rpc: rpc, name: name, want: want, call: call})
	}
	seq := 0
	fresh := func() string { seq++; return uniq(fmt.Sprintf("fresh-%d", seq)) }
	for _, id := range badIDs {
		add("CreateContainer", "id "+short(id), invalid, func(ctx context.Context, c types.APIClient) error {
			_, err := c.CreateContainer(ctx, &types.CreateContainerRequest{Id: id, BundlePath: b["good"]})
			return err
		})
		for _, rpc := range []string{"UpdateContainer", "Signal", "UpdateProcess", "AddProcess", "CreateCheckpoint",
			"DeleteCheckpoint", "ListCheckpoint", "State", "Stats"} {
			want := lookup
			if rpc == "State" && id == "" {
				want = anyAnswer // "" lists every container
			}
			add(rpc, "id "+short(id), want, byID(rpc, id, "init"))
		}
	}
	for _, rpc := range []string{"UpdateContainer", "Signal", "UpdateProcess", "AddProcess", "CreateCheckpoint",
		"DeleteCheckpoint", "ListCheckpoint", "State", "Stats"} {
		add(rpc, "unknown id", notFound, byID(rpc, uniq("no-such-container"), "init"))
	}
	for _, rpc := range []string{"Signal", "UpdateProcess"} {
		for _, pid := range []string{"", "no-such-pid", "../init", strings.Repeat("p", 1<<16)} {
			add(rpc, "victim pid "+short(pid), lookup, byID(rpc, victim, pid))
		}
	}
	create := func(name string, want []codes.Code, r func() *types.CreateContainerRequest) {
		add("CreateContainer", name, want, func(ctx context.Context, c types.APIClient) error {
			_, err := c.CreateContainer(ctx, r())
			return err
		})
	}
	create("duplicate id", exists, func() *types.CreateContainerRequest {
		return &types.CreateContainerRequest{Id: victim, BundlePath: b["good"]}
	})
	create("empty bundle", invalid, func() *types.CreateContainerRequest { return &types.CreateContainerRequest{Id: fresh()} })
	for _, name := range []string{"empty", "garbage", "noargs", "badexe", "noroot", "noprocess", "fifo", "devzero", "oversized"} {
		create("bundle "+name, failed, func() *types.CreateContainerRequest {
			return &types.CreateContainerRequest{Id: fresh(), BundlePath: b[name]}
		})
	}

	create("missing bundle", failed, func() *types.CreateContainerRequest {
		return &types.CreateContainerRequest{Id: fresh(), BundlePath: "/nonexistent/bundle"}
	})
	create("relative bundle", failed, func() *types.CreateContainerRequest {
		return &types.CreateContainerRequest{Id: fresh(), BundlePath: "relative/../../bundle"}
	})
	create("1 MiB bundle path", failed, func() *types.CreateContainerRequest {
		return &types.CreateContainerRequest{Id: fresh(), BundlePath: "/" + strings.Repeat("x", 1<<20)}
	})
	create("missing stdin", failed, func() *types.CreateContainerRequest {
		return &types.CreateContainerRequest{Id: fresh(), BundlePath: b["good"], Stdin: "/nonexistent/stdin"}
	})
	create("missing runtime", failed, func() *types.CreateContainerRequest {
		return &types.CreateContainerRequest{Id: fresh(), BundlePath: b["good"], Runtime: "/nonexistent/runc"}
	})
	create("missing checkpoint", failed, func() *types.CreateContainerRequest {
		return &types.CreateContainerRequest{Id: fresh(), BundlePath: b["good"], Checkpoint: "no-such-checkpoint"}
	})
	create("checkpoint name ../x", invalid, func() *types.CreateContainerRequest {
		return &types.CreateContainerRequest{Id: fresh(), BundlePath: b["good"], Checkpoint: "../x"}
	})

	upd := func(name string, want []codes.Code, r *types.UpdateContainerRequest) {
		add("UpdateContainer", name, want, func(ctx context.Context, c types.APIClient) error {
			_, err := c.UpdateContainer(ctx, r)
			return err
		})
	}
	upd("unknown status", invalid, &types.UpdateContainerRequest{Id: victim, Status: "bogus"})
	upd("memory limit > MaxInt64", invalid, &types.UpdateContainerRequest{Id: victim, Resources: &types.UpdateResource{MemoryLimit: 1<<63 + 5}})
	upd("pids limit 2^64-2", invalid, &types.UpdateContainerRequest{Id: victim, Resources: &types.UpdateResource{PidsLimit: 1<<64 - 2}})
	upd("cpuset garbage", failed, &types.UpdateContainerRequest{Id: victim, Resources: &types.UpdateResource{CpusetCpus: "garbage-cpus"}})
	upd("blkio device without device", failed, &types.UpdateContainerRequest{Id: victim, Resources: &types.UpdateResource{
		BlkioThrottleReadBpsDevice: []*types.ThrottleDevice{{Rate: 1}}}})

	add("Signal", "signal 999", invalid, func(ctx context.Context, c types.APIClient) error {
		_, err := c.Signal(ctx, &types.SignalRequest{Id: victim, Pid: "init", Signal: 999})
		return err
	})
	add("Signal", "signal 65", invalid, func(ctx context.Context, c types.APIClient) error {
		_, err := c.Signal(ctx, &types.SignalRequest{Id: victim, Pid: "init", Signal: 65})
		return err
	})

	exec := func(name string, want []codes.Code, r func() *types.AddProcessRequest) {
		add("AddProcess", name, want, func(ctx context.Context, c types.APIClient) error {
			_, err := c.AddProcess(ctx, r())
			return err
		})
	}
	for _, pid := range []string{"", ".", "..", "../e", "a/b", ".hidden", strings.Repeat("p", 77)} {
		exec("pid "+short(pid), invalid, func() *types.AddProcessRequest { return execReq(victim, pid, "sleep", "forever") })
	}
	exec("pid init", exists, func() *types.AddProcessRequest { return execReq(victim, "init", "sleep", "forever") })
	exec("duplicate pid", exists, func() *types.AddProcessRequest { return execReq(victim, "e1", "sleep", "forever") })
	exec("no user", invalid, func() *types.AddProcessRequest {
		r := execReq(victim, fresh(), "sleep", "forever")
		r.User = nil
		return r
	})
	exec("no args", failed, func() *types.AddProcessRequest {
		r := execReq(victim, fresh())
		r.Args = nil
		return r
	})
	exec("missing executable", failed, func() *types.AddProcessRequest {
		r := execReq(victim, fresh())
		r.Args = []string{"/nonexistent"}
		return r
	})
	exec("relative cwd", failed, func() *types.AddProcessRequest {
		r := execReq(victim, fresh(), "sleep", "forever")
		r.Cwd = "relative/dir"
		return r
	})
	exec("bogus rlimit", failed, func() *types.AddProcessRequest {
		r := execReq(victim, fresh(), "sleep", "forever")
		r.Rlimits = []*types.Rlimit{{Type: "RLIMIT_BOGUS", Soft: 1, Hard: 1}}
		return r
	})
	exec("missing stdin", failed, func() *types.AddProcessRequest {
		r := execReq(victim, fresh(), "sleep", "forever")
		r.Stdin = "/nonexistent/stdin"
		return r
	})

	ckpt := func(name string, want []codes.Code, r *types.CreateCheckpointRequest) {
		add("CreateCheckpoint", name, want, func(ctx context.Context, c types.APIClient) error {
			_, err := c.CreateCheckpoint(ctx, r)
			return err
		})
	}
	ckpt("no checkpoint", invalid, &types.CreateCheckpointRequest{Id: victim})
	ckpt("empty name", invalid, &types.CreateCheckpointRequest{Id: victim, Checkpoint: &types.Checkpoint{}})
	ckpt("name ../x", invalid, &types.CreateCheckpointRequest{Id: victim, Checkpoint: &types.Checkpoint{Name: "../x"}})
	ckpt("name a/b", invalid, &types.CreateCheckpointRequest{Id: victim, Checkpoint: &types.Checkpoint{Name: "a/b"}})
	for _, name := range []string{"", "../x", "no-such-checkpoint", strings.Repeat("n", 1<<16)} {
		want := failed
		if name == "no-such-checkpoint" {
			want = anyAnswer // v0.2: deleting what is not there succeeds
		}
		add("DeleteCheckpoint", "name "+short(name), want, func(ctx context.Context, c types.APIClient) error {
			_, err := c.DeleteCheckpoint(ctx, &types.DeleteCheckpointRequest{Id: victim, Name: name})
			return err
		})
	}
	add("ListCheckpoint", "missing dir", anyAnswer, func(ctx context.Context, c types.APIClient) error {
		_, err := c.ListCheckpoint(ctx, &types.ListCheckpointRequest{Id: victim, CheckpointDir: "/nonexistent/dir"})
		return err
	})

	events := func(name string, want []codes.Code, r *types.EventsRequest) {
		add("Events", name, want, func(ctx context.Context, c types.APIClient) error {
			st, err := c.Events(ctx, r)
			if err != nil {
				return err
			}
			for {
				if _, err := st.Recv(); err != nil {
					if errors.Is(err, io.EOF) {
						return nil
					}
					return err
				}
			}
		})
	}
	events("timestamp out of range", invalid, &types.EventsRequest{Timestamp: &timestamppb.Timestamp{Seconds: -1e15}, StoredOnly: true})
	events("nanos out of range", invalid, &types.EventsRequest{Timestamp: &timestamppb.Timestamp{Seconds: 1, Nanos: 2e9}, StoredOnly: true})
	events("storedOnly without timestamp", invalid, &types.EventsRequest{StoredOnly: true})
	events("bad id filter", anyAnswer, &types.EventsRequest{Timestamp: &timestamppb.Timestamp{}, StoredOnly: true, Id: "../x"})
	events("afterSeq 2^64-1", anyAnswer, &types.EventsRequest{AfterSeq: 1<<64 - 1, StoredOnly: true})
	add("GetServerVersion", "no input", anyAnswer, func(ctx context.Context, c types.APIClient) error {
		_, err := c.GetServerVersion(ctx, &types.GetServerVersionRequest{})
		return err
	})
	return t
}

// byID calls rpc on container id (and process pid where it takes one).
func byID(rpc, id, pid string) func(context.Context, types.APIClient) error {
	return func(ctx context.Context, c types.APIClient) error {
		var err error
		switch rpc {
		case "UpdateContainer":
			_, err = c.UpdateContainer(ctx, &types.UpdateContainerRequest{Id: id, Status: "paused"})
		case "Signal":
			_, err = c.Signal(ctx, &types.SignalRequest{Id: id, Pid: pid, Signal: 0})
		case "UpdateProcess":
			_, err = c.UpdateProcess(ctx, &types.UpdateProcessRequest{Id: id, Pid: pid, Width: 80, Height: 24})
		case "AddProcess":
			_, err = c.AddProcess(ctx, execReq(id, "e-bad", "sleep", "forever"))
		case "CreateCheckpoint":
			_, err = c.CreateCheckpoint(ctx, &types.CreateCheckpointRequest{Id: id, Checkpoint: &types.Checkpoint{Name: "ck"}})
		case "DeleteCheckpoint":
			_, err = c.DeleteCheckpoint(ctx, &types.DeleteCheckpointRequest{Id: id, Name: "ck"})
		case "ListCheckpoint":
			_, err = c.ListCheckpoint(ctx, &types.ListCheckpointRequest{Id: id})
		case "State":
			_, err = c.State(ctx, &types.StateRequest{Id: id})
		case "Stats":
			_, err = c.Stats(ctx, &types.StatsRequest{Id: id})
		default:
			panic(rpc)
		}
		return err
	}
}

// state is what bad input must not change.
type state struct {
	procs   map[string]string // "id/pid" -> host pid
	runc    []string
	dirs    []string
	shims   int
	lastSeq uint64
}

func snapshot(env *harness.Env, d *harness.Daemon) (state, error) {
	ctx := context.Background()
	st, err := d.Client.State(ctx, &types.StateRequest{})
	if err != nil {
		return state{}, err
	}
	s := state{procs: map[string]string{}, runc: d.Runc().IDs(), shims: len(env.Shims(d.StateDir))}
	for _, c := range st.GetContainers() {
		for _, p := range c.GetProcesses() {
			s.procs[c.Id+"/"+p.Pid] = fmt.Sprint(p.SystemPid)
		}
	}
	entries, _ := os.ReadDir(d.StateDir)
	for _, e := range entries {
		if e.IsDir() && e.Name() != ".retired" {
			s.dirs = append(s.dirs, e.Name())
		}
		if e.Name() == ".aside" {
			aside, _ := os.ReadDir(filepath.Join(d.StateDir, ".aside"))
			s.dirs = append(s.dirs, fmt.Sprintf(".aside holds %d", len(aside)))
		}
	}
	sort.Strings(s.dirs)
	evs, err := harness.StoredEvents(ctx, d.Client)
	if err != nil {
		return state{}, err
	}
	if len(evs) > 0 {
		s.lastSeq = evs[len(evs)-1].Seq
	}
	return s, nil
}

func (a state) diff(b state) []string {
	var out []string
	for k, v := range a.procs {
		if b.procs[k] != v {
			out = append(out, fmt.Sprintf("process %s: pid %s, now %q", k, v, b.procs[k]))
		}
	}
	for k := range b.procs {
		if _, ok := a.procs[k]; !ok {
			out = append(out, fmt.Sprintf("new process %s", short(k)))
		}
	}
	if strings.Join(a.runc, ",") != strings.Join(b.runc, ",") {
		out = append(out, fmt.Sprintf("runc containers %v, now %v", a.runc, b.runc))
	}
	if strings.Join(a.dirs, ",") != strings.Join(b.dirs, ",") {
		out = append(out, fmt.Sprintf("state dir entries %v, now %v", a.dirs, b.dirs))
	}
	if a.shims != b.shims {
		out = append(out, fmt.Sprintf("%d shims, now %d", a.shims, b.shims))
	}
	return out
}
