package fuzz_test

import (
	"context"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/api/server"
	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/specs"
	"github.com/evjournal/containerd/supervisor"
)

var stateRoot string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ctrd-fuzz-")
	if err != nil {
		panic(err)
	}
	stateRoot = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// FuzzValidateID: whatever ValidateID accepts is safe to build a path and
// a runc argument from; what it rejects is InvalidArgument; and the ids
// clients actually use are accepted.
func FuzzValidateID(f *testing.F) {
	for _, s := range []string{"", ".", "..", "../x", "a/b", "/abs", "abc", "a.b", "a..b", "-x", "_x", ".retired", "x\x00y",
		"é", "a b", strings.Repeat("a", runtime.MaxIDLength), strings.Repeat("a", runtime.MaxIDLength+1),
		"4f1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		err := runtime.ValidateID(id)
		if err != nil {
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("ValidateID(%q) = %v: not classified InvalidArgument", id, err)
			}
			if common(id) {
				t.Fatalf("ValidateID(%q) rejects an ordinary id: %v", id, err)
			}
			return
		}
		switch {
		case id == "" || len(id) > runtime.MaxIDLength:
			t.Fatalf("accepted %q: empty or longer than %d", id, runtime.MaxIDLength)
		case id[0] == '.' || id[0] == '-':
			t.Fatalf("accepted %q: hidden name, '.', '..' or a runc flag", id)
		}
		for i := 0; i < len(id); i++ {
			if b := id[i]; b <= ' ' || b >= 0x7f || b == '/' || b == '\\' {
				t.Fatalf("accepted %q: byte %q", id, b)
			}
		}
		root := "/run/containerd"
		p := filepath.Join(root, id)
		if filepath.Dir(p) != root || filepath.Base(p) != id {
			t.Fatalf("accepted %q, but %s is not a child of %s", id, p, root)
		}
	})
}

// common reports whether id looks like the ids v0.2 clients use (docker's
// 64 hex digits, names like web-1.prod_2).
func common(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		b := id[i]
		alnum := b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
		if !alnum && (i == 0 || (b != '-' && b != '_' && b != '.')) {
			return false
		}
	}
	return true
}

// srv is one API server per fuzzing process, on a supervisor whose runtime
// is the recording fake. Container "c1" lives for ever, with exec "e1".
type srv struct {
	api *server.Server
	rec *recorder
}

var (
	setupOnce sync.Once
	shared    *srv
)

func setup(t *testing.T) *srv {
	setupOnce.Do(func() {
		l := logrus.New()
		l.SetOutput(io.Discard)
		log := logrus.NewEntry(l)
		rec := &recorder{}
		dir, err := os.MkdirTemp(stateRoot, "state-")
		if err != nil {
			panic(err)
		}
		sup, err := supervisor.New(supervisor.Config{StateDir: dir, Runtime: "runc", RuntimeArgs: []string{"--root", "/r"},
			RuntimeImpl: fakeRuntime{rec: rec}, MonitorImpl: newFakeMonitor(), Logger: log, ReconcileInterval: -1, RetainCount: 64})
		if err != nil {
			panic(err)
		}
		if err := sup.Start(context.Background()); err != nil {
			panic(err)
		}
		shared = &srv{api: server.New(sup, server.WithLogger(log)), rec: rec}
		ctx := context.Background()
		if _, err := shared.api.CreateContainer(ctx, &types.CreateContainerRequest{Id: "c1", BundlePath: "/bundle"}); err != nil {
			panic(err)
		}
		if _, err := shared.api.AddProcess(ctx, &types.AddProcessRequest{Id: "c1", Pid: "e1", User: &types.User{}, Args: []string{"/x"}}); err != nil {
			panic(err)
		}
	})
	shared.rec.reset()
	return shared
}

// answer checks what every handler must give: a status error with a code
// that says something, within the deadline.
func answer(t *testing.T, rpc string, err error) codes.Code {
	t.Helper()
	if err == nil {
		return codes.OK
	}
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("%s: error is not a gRPC status: %v", rpc, err)
	}
	switch st.Code() {
	case codes.DeadlineExceeded, codes.Canceled:
		t.Fatalf("%s: no answer within the deadline: %v", rpc, err)
	case codes.Unknown:
		if rpc != "CreateCheckpoint" { // the fake's own error is unclassified
			t.Fatalf("%s: unclassified error: %v", rpc, err)
		}
	}
	return st.Code()
}

func (s *srv) violations(t *testing.T) {
	t.Helper()
	s.rec.mu.Lock()
	defer s.rec.mu.Unlock()
	if len(s.rec.bad) > 0 {
		t.Fatalf("below the API: %s", strings.Join(s.rec.bad, "; "))
	}
}

// FuzzRequests decodes the bytes as the request of one RPC (chosen by
// which) and calls the server's handler: no panic, an answer in time, a
// classified error, invalid ids and pids never reaching the runtime, and
// create/exec requests converted field for field.
func FuzzRequests(f *testing.F) {
	seeds := []proto.Message{
		&types.CreateContainerRequest{Id: "x1", BundlePath: "/b", Labels: []string{"l"}, Runtime: "crun", RuntimeArgs: []string{"--a"}},
		&types.AddProcessRequest{Id: "c1", Pid: "e2", User: &types.User{Uid: 1, Gid: 2, AdditionalGids: []uint32{3}},
			Args: []string{"/x"}, Capabilities: []string{"CAP_KILL"}, Rlimits: []*types.Rlimit{{Type: "RLIMIT_NOFILE", Soft: 1, Hard: 2}}},
		&types.UpdateContainerRequest{Id: "c1", Status: "paused"},
		&types.SignalRequest{Id: "c1", Pid: "init", Signal: 9},
		&types.UpdateProcessRequest{Id: "c1", Pid: "e1", Width: 80, Height: 24},
		&types.StateRequest{Id: "c1"},
		&types.DeleteCheckpointRequest{Id: "c1", Name: "ck"},
		&types.StatsRequest{Id: "c1"},
		&types.EventsRequest{StoredOnly: true, AfterSeq: 1},
	}
	for i, m := range seeds {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), b)
	}
	f.Add(uint8(0), []byte("\x0a\x04../x\x12\x02/b"))
	f.Add(uint8(1), []byte("\x0a\x02c1\x3a\x02.."))
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		s := setup(t)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		switch which % 10 {
		case 0:
			var r types.CreateContainerRequest
			if proto.Unmarshal(data, &r) == nil {
				s.create(t, ctx, &r)
			}
		case 1:
			var r types.AddProcessRequest
			if proto.Unmarshal(data, &r) == nil {
				s.exec(t, ctx, &r)
			}
		case 2:
			var r types.UpdateContainerRequest
			if proto.Unmarshal(data, &r) == nil {
				_, err := s.api.UpdateContainer(ctx, &r)
				answer(t, "UpdateContainer", err)
			}
		case 3:
			var r types.SignalRequest
			if proto.Unmarshal(data, &r) == nil {
				_, err := s.api.Signal(ctx, &r)
				if answer(t, "Signal", err) == codes.OK && r.Signal > 64 {
					t.Fatalf("signal %d accepted", r.Signal)
				}
			}
		case 4:
			var r types.UpdateProcessRequest
			if proto.Unmarshal(data, &r) == nil {
				_, err := s.api.UpdateProcess(ctx, &r)
				answer(t, "UpdateProcess", err)
			}
		case 5:
			var r types.StateRequest
			if proto.Unmarshal(data, &r) == nil {
				_, err := s.api.State(ctx, &r)
				answer(t, "State", err)
			}
		case 6:
			var r types.CreateCheckpointRequest
			if proto.Unmarshal(data, &r) == nil {
				_, err := s.api.CreateCheckpoint(ctx, &r)
				answer(t, "CreateCheckpoint", err)
			}
		case 7:
			var r types.DeleteCheckpointRequest
			if proto.Unmarshal(data, &r) == nil {
				_, err := s.api.DeleteCheckpoint(ctx, &r)
				code := answer(t, "DeleteCheckpoint", err)
				if runtime.ValidateID(r.Name) != nil && code != codes.InvalidArgument && code != codes.NotFound {
					t.Fatalf("delete checkpoint %q: %v", r.Name, err)
				}
			}
		case 8:
			var r types.StatsRequest
			if proto.Unmarshal(data, &r) == nil {
				_, err := s.api.Stats(ctx, &r)
				answer(t, "Stats", err)
			}
		case 9:
			var r types.EventsRequest
			if proto.Unmarshal(data, &r) == nil {
				s.events(t, &r)
			}
		}
		s.violations(t)
	})
}

func (s *srv) create(t *testing.T, ctx context.Context, r *types.CreateContainerRequest) {
	_, err := s.api.CreateContainer(ctx, r)
	code := answer(t, "CreateContainer", err)
	s.rec.mu.Lock()
	created := append([]runtime.ContainerOpts(nil), s.rec.created...)
	s.rec.mu.Unlock()
	if r.BundlePath == "" || runtime.ValidateID(r.Id) != nil {
		if code != codes.InvalidArgument || len(created) > 0 {
			t.Fatalf("create with id %q bundle %q: %v, runtime called %d times", r.Id, r.BundlePath, err, len(created))
		}
		return
	}
	if code != codes.OK {
		return // AlreadyExists for an id in use
	}
	if len(created) != 1 {
		t.Fatalf("create succeeded after %d runtime.New calls", len(created))
	}
	o := created[0]
	wantRT, wantArgs := "runc", []string{"--root", "/r"}
	if r.Runtime != "" {
		wantRT, wantArgs = r.Runtime, r.RuntimeArgs
	}
	if o.ID != r.Id || o.Bundle != r.BundlePath || !sameStrings(o.Labels, r.Labels) || o.NoPivotRoot != r.NoPivotRoot ||
		o.Runtime != wantRT || !sameStrings(o.RuntimeArgs, wantArgs) {
		t.Fatalf("request %v became %+v", r, o)
	}
}

func (s *srv) exec(t *testing.T, ctx context.Context, r *types.AddProcessRequest) {
	_, err := s.api.AddProcess(ctx, r)
	code := answer(t, "AddProcess", err)
	s.rec.mu.Lock()
	execs := append([]execCall(nil), s.rec.execs...)
	s.rec.mu.Unlock()
	if r.Id == "" || r.Pid == "" || r.User == nil || runtime.ValidateID(r.Pid) != nil {
		if code != codes.InvalidArgument || len(execs) > 0 {
			t.Fatalf("exec %q/%q user %v: %v, runtime called %d times", r.Id, r.Pid, r.User, err, len(execs))
		}
		return
	}
	if code != codes.OK {
		return
	}
	if len(execs) != 1 {
		t.Fatalf("exec succeeded after %d runtime Exec calls", len(execs))
	}
	e := execs[0]
	sp := e.spec
	caps := sp.Capabilities
	if e.id != r.Id || e.pid != r.Pid || !sameStrings(sp.Args, r.Args) || !sameStrings(sp.Env, r.Env) || sp.Cwd != r.Cwd ||
		sp.Terminal != r.Terminal || sp.User.UID != r.User.Uid || sp.User.GID != r.User.Gid ||
		!reflect.DeepEqual(nonNil32(sp.User.AdditionalGids), nonNil32(r.User.AdditionalGids)) ||
		sp.NoNewPrivileges != r.NoNewPrivileges || sp.ApparmorProfile != r.ApparmorProfile || sp.SelinuxLabel != r.SelinuxLabel ||
		e.stdio != (runtime.Stdio{Stdin: r.Stdin, Stdout: r.Stdout, Stderr: r.Stderr}) {
		t.Fatalf("exec request %v became %+v", r, e)
	}
	if caps == nil || !sameStrings(caps.Bounding, r.Capabilities) || !sameStrings(caps.Effective, r.Capabilities) ||
		!sameStrings(caps.Inheritable, r.Capabilities) || !sameStrings(caps.Permitted, r.Capabilities) || len(caps.Ambient) != 0 {
		t.Fatalf("capabilities %v became %+v", r.Capabilities, caps)
	}
	var rl []string
	for _, x := range r.Rlimits {
		if x != nil {
			rl = append(rl, x.Type)
		}
	}
	var got []string
	for _, x := range sp.Rlimits {
		got = append(got, x.Type)
	}
	if !sameStrings(got, rl) {
		t.Fatalf("rlimits %v became %v", rl, got)
	}
}

func sameStrings(a, b []string) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

func nonNil32(x []uint32) []uint32 {
	if x == nil {
		return []uint32{}
	}
	return x
}

// events runs the Events handler on a fake stream for at most 10 ms.
func (s *srv) events(t *testing.T, r *types.EventsRequest) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	st := &fakeStream{ctx: ctx}
	err := s.api.Events(r, st)
	if err == nil {
		return
	}
	if st, ok := status.FromError(err); ok && (st.Code() == codes.DeadlineExceeded || st.Code() == codes.Canceled) {
		return // a live subscription, ended by our deadline
	}
	answer(t, "Events", err)
}

type fakeStream struct {
	grpc.ServerStream
	ctx context.Context
	n   int
}

func (f *fakeStream) Context() context.Context { return f.ctx }
func (f *fakeStream) Send(*types.Event) error  { f.n++; return nil }

// SendMsg is what Events sends its pre-encoded events with:
// without it the embedded nil ServerStream was called.
func (f *fakeStream) SendMsg(any) error            { f.n++; return nil }
func (f *fakeStream) SetHeader(metadata.MD) error  { return nil }
func (f *fakeStream) SendHeader(metadata.MD) error { return nil }
func (f *fakeStream) SetTrailer(metadata.MD)       {}

// FuzzUpdateResources: UpdateResource is converted field by field, 0 means
// unchanged (nil), 2^64-1 is -1 for the signed limits, and any value that
// does not fit is refused with InvalidArgument before the runtime sees it.
func FuzzUpdateResources(f *testing.F) {
	f.Add(uint64(0), uint64(0), uint64(0), uint64(0), "", uint64(0), uint64(0), uint64(0), int64(0), uint64(0))
	f.Add(uint64(500), uint64(1024), uint64(100000), uint64(50000), "0-1", uint64(1<<30), uint64(math.MaxUint64), uint64(100), int64(8), uint64(1<<20))
	f.Add(uint64(70000), uint64(1), uint64(1), uint64(1<<63), "x", uint64(1<<63+1), uint64(1), uint64(1<<64-2), int64(-1), uint64(0))
	f.Fuzz(func(t *testing.T, weight, shares, period, quota uint64, cpus string, mem, swap, pids uint64, major int64, rate uint64) {
		s := setup(t)
		r := &types.UpdateResource{BlkioWeight: weight, CpuShares: shares, CpuPeriod: period, CpuQuota: quota, CpusetCpus: cpus,
			MemoryLimit: mem, MemorySwap: swap, PidsLimit: pids}
		if rate != 0 {
			r.BlkioThrottleReadBpsDevice = []*types.ThrottleDevice{{BlkIODevice: &types.BlockIODevice{Major: major, Minor: 0}, Rate: rate}}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := s.api.UpdateContainer(ctx, &types.UpdateContainerRequest{Id: "c1", Resources: r})
		code := answer(t, "UpdateContainer", err)
		s.rec.mu.Lock()
		got := append([]*specs.LinuxResources(nil), s.rec.resources...)
		s.rec.mu.Unlock()
		bad := weight > math.MaxUint16 || outOfRange(quota) || outOfRange(mem) || outOfRange(swap) || outOfRange(pids) ||
			(rate != 0 && major < 0)
		if bad {
			if code != codes.InvalidArgument || len(got) > 0 {
				t.Fatalf("%v: %v, runtime called %d times", r, err, len(got))
			}
			return
		}
		if code != codes.OK || len(got) != 1 || got[0] == nil {
			t.Fatalf("%v: %v, runtime called %d times", r, err, len(got))
		}
		res := got[0]
		checkSigned(t, "memory limit", mem, func() *int64 {
			if res.Memory == nil {
				return nil
			}
			return res.Memory.Limit
		}())
		checkSigned(t, "memory swap", swap, func() *int64 {
			if res.Memory == nil {
				return nil
			}
			return res.Memory.Swap
		}())
		checkSigned(t, "cpu quota", quota, func() *int64 {
			if res.CPU == nil {
				return nil
			}
			return res.CPU.Quota
		}())
		checkSigned(t, "pids", pids, func() *int64 {
			if res.Pids == nil {
				return nil
			}
			return res.Pids.Limit
		}())
		if shares != 0 && (res.CPU == nil || res.CPU.Shares == nil || *res.CPU.Shares != shares) ||
			shares == 0 && res.CPU != nil && res.CPU.Shares != nil {
			t.Fatalf("cpu shares %d became %+v", shares, res.CPU)
		}
		if cpus != "" && (res.CPU == nil || res.CPU.Cpus != cpus) {
			t.Fatalf("cpuset %q became %+v", cpus, res.CPU)
		}
		if weight != 0 && (res.BlockIO == nil || res.BlockIO.Weight == nil || uint64(*res.BlockIO.Weight) != weight) {
			t.Fatalf("blkio weight %d became %+v", weight, res.BlockIO)
		}
		if rate != 0 && (res.BlockIO == nil || len(res.BlockIO.ThrottleReadBpsDevice) != 1 ||
			res.BlockIO.ThrottleReadBpsDevice[0].Rate != rate || res.BlockIO.ThrottleReadBpsDevice[0].Major != major) {
			t.Fatalf("throttle %d:%d became %+v", major, rate, res.BlockIO)
		}
		if weight == 0 && rate == 0 && res.BlockIO != nil {
			t.Fatalf("no blkio field set, but %+v", res.BlockIO)
		}
	})
}

func outOfRange(v uint64) bool { return v > math.MaxInt64 && v != math.MaxUint64 }

func checkSigned(t *testing.T, name string, v uint64, got *int64) {
	t.Helper()
	switch {
	case v == 0 && got != nil:
		t.Fatalf("%s 0 (unchanged) became %d", name, *got)
	case v == math.MaxUint64 && (got == nil || *got != -1):
		t.Fatalf("%s 2^64-1 did not become -1: %v", name, got)
	case v != 0 && v != math.MaxUint64 && (got == nil || *got != int64(v)):
		t.Fatalf("%s %d became %v", name, v, got)
	}
}
