package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/supervisor"
	"github.com/evjournal/containerd/supervisor/journal"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// wantStatus checks the gRPC code and the exact message of err.
func wantStatus(t *testing.T, err error, code codes.Code, msg string) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("error %v is not a gRPC status", err)
	}
	if st.Code() != code || st.Message() != msg {
		t.Fatalf("got %s %q, want %s %q", st.Code(), st.Message(), code, msg)
	}
}

func TestHandlerValidation(t *testing.T) {
	_, c, _ := startServer(t, &fakeBackend{})
	ctx := context.Background()
	call := func(f func() (any, error)) error { _, err := f(); return err }
	tests := []struct {
		name string
		call func() error
		code codes.Code
		msg  string
	}{
		{"create without bundle", func() error {
			return call(func() (any, error) { return c.CreateContainer(ctx, &types.CreateContainerRequest{Id: "x"}) })
		}, codes.InvalidArgument, "empty bundle path"},
		{"exec without id", func() error {
			return call(func() (any, error) { return c.AddProcess(ctx, &types.AddProcessRequest{Pid: "p", User: &types.User{}}) })
		}, codes.InvalidArgument, "container id cannot be empty"},
		{"exec without pid", func() error {
			return call(func() (any, error) { return c.AddProcess(ctx, &types.AddProcessRequest{Id: "x", User: &types.User{}}) })
		}, codes.InvalidArgument, "process id cannot be empty"},
		{"exec without user", func() error {
			return call(func() (any, error) { return c.AddProcess(ctx, &types.AddProcessRequest{Id: "x", Pid: "p"}) })
		}, codes.InvalidArgument, "process user cannot be empty"},
		{"checkpoint absent", func() error {
			return call(func() (any, error) { return c.CreateCheckpoint(ctx, &types.CreateCheckpointRequest{Id: "x"}) })
		}, codes.InvalidArgument, "checkpoint cannot be empty"},
		{"checkpoint without name", func() error {
			return call(func() (any, error) {
				return c.CreateCheckpoint(ctx, &types.CreateCheckpointRequest{Id: "x", Checkpoint: &types.Checkpoint{}})
			})
		}, codes.InvalidArgument, "checkpoint name cannot be empty"},
		{"delete checkpoint without name", func() error {
			return call(func() (any, error) { return c.DeleteCheckpoint(ctx, &types.DeleteCheckpointRequest{Id: "x"}) })
		}, codes.InvalidArgument, "checkpoint name cannot be empty"},
		{"list checkpoints of unknown container", func() error {
			return call(func() (any, error) { return c.ListCheckpoint(ctx, &types.ListCheckpointRequest{Id: "x"}) })
		}, codes.NotFound, "no such containers"},
		{"signal out of range", func() error {
			return call(func() (any, error) { return c.Signal(ctx, &types.SignalRequest{Id: "x", Pid: "init", Signal: 65}) })
		}, codes.InvalidArgument, "invalid signal 65: invalid argument"},
		{"update with bad resources", func() error {
			return call(func() (any, error) {
				return c.UpdateContainer(ctx, &types.UpdateContainerRequest{Id: "x", Resources: &types.UpdateResource{BlkioWeight: 1 << 20}})
			})
		}, codes.InvalidArgument, "blkioWeight 1048576 is out of range (max 65535): invalid argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantStatus(t, tt.call(), tt.code, tt.msg) })
	}
}

// Errors from below keep their text; the code comes from their class.
func TestHandlerErrorMapping(t *testing.T) {
	b := &fakeBackend{}
	_, c, _ := startServer(t, b)
	ctx := context.Background()
	tests := []struct {
		err  error
		code codes.Code
	}{
		{supervisor.ErrContainerNotFound, codes.NotFound},
		{supervisor.ErrProcessNotFound, codes.NotFound},
		{supervisor.ErrUnknownContainerStatus, codes.InvalidArgument},
		{fmt.Errorf("mkdir /run/containerd/x: %w", errdefs.ErrAlreadyExists), codes.AlreadyExists},
		{syscall.ESRCH, codes.Unknown},
		{errors.New("oci runtime error: exec: \"nope\": executable file not found in $PATH"), codes.Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			b.signal = func(string, string, syscall.Signal) error { return tt.err }
			_, err := c.Signal(ctx, &types.SignalRequest{Id: "x", Pid: "init", Signal: 15})
			wantStatus(t, err, tt.code, tt.err.Error())
		})
	}
}

func TestHandlerPanicIsInternal(t *testing.T) {
	b := &fakeBackend{state: func(string) ([]supervisor.ContainerInfo, error) { panic("boom") }}
	_, c, _ := startServer(t, b)
	_, err := c.State(context.Background(), &types.StateRequest{})
	if status.Code(err) != codes.Internal {
		t.Fatalf("got %v, want Internal", err)
	}
	// The server is still there.
	if _, err := c.GetServerVersion(context.Background(), &types.GetServerVersionRequest{}); err != nil {
		t.Fatal(err)
	}
}

func TestGetServerVersion(t *testing.T) {
	_, c, _ := startServer(t, &fakeBackend{})
	v, err := c.GetServerVersion(context.Background(), &types.GetServerVersionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if v.Major != 0 || v.Minor != 2 || v.Patch != 9 {
		t.Fatalf("version %d.%d.%d, want 0.2.9", v.Major, v.Minor, v.Patch)
	}
}

func TestHealth(t *testing.T) {
	s, _, conn := startServer(t, &fakeBackend{})
	h := healthpb.NewHealthClient(conn)
	ctx := context.Background()
	check := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		resp, err := h.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil || resp.Status != want {
			t.Fatalf("Check(\"\") = %v, %v; want %v", resp, err, want)
		}
	}
	check(healthpb.HealthCheckResponse_NOT_SERVING)
	s.SetServing(true)
	check(healthpb.HealthCheckResponse_SERVING)
	_, err := h.Check(ctx, &healthpb.HealthCheckRequest{Service: "types.API"})
	wantStatus(t, err, codes.NotFound, "unknown service")
	s.SetServing(false)
	check(healthpb.HealthCheckResponse_NOT_SERVING)
}

func TestCreateContainerHandler(t *testing.T) {
	var got supervisor.CreateRequest
	b := &fakeBackend{create: func(r supervisor.CreateRequest) (supervisor.ContainerInfo, error) {
		got = r
		return supervisor.ContainerInfo{ID: r.ID, Bundle: r.Bundle, Status: "running", Labels: r.Labels, Runtime: "runc",
			Processes: []supervisor.ProcessInfo{{ID: "init", SystemPid: 42}}}, nil
	}}
	_, c, _ := startServer(t, b)
	req := &types.CreateContainerRequest{
		Id: "c1", BundlePath: "rel/bundle", Stdout: "/tmp/out", Labels: []string{"a"},
		NoPivotRoot: true, Runtime: "crun", RuntimeArgs: nil, Checkpoint: "cp", CheckpointDir: "/cps",
	}
	resp, err := c.CreateContainer(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := supervisor.CreateRequest{ID: "c1", Bundle: "rel/bundle", Stdio: runtime.Stdio{Stdout: "/tmp/out"},
		Labels: []string{"a"}, NoPivotRoot: true, Runtime: "crun", Checkpoint: "cp", CheckpointDir: "/cps"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("request %+v, want %+v", got, want)
	}
	ct := resp.GetContainer()
	if ct.GetBundlePath() != "rel/bundle" || ct.GetStatus() != "running" || len(ct.GetPids()) != 0 ||
		ct.GetProcesses()[0].GetSystemPid() != 42 || ct.GetProcesses()[0].GetStdin() != "/dev/null" {
		t.Fatalf("container %v", ct)
	}
}

func TestUpdateContainerHandler(t *testing.T) {
	var got supervisor.UpdateRequest
	b := &fakeBackend{update: func(r supervisor.UpdateRequest) error { got = r; return nil }}
	_, c, _ := startServer(t, b)
	ctx := context.Background()
	res := &types.UpdateResource{MemoryLimit: 1 << 20}

	if _, err := c.UpdateContainer(ctx, &types.UpdateContainerRequest{Id: "x", Status: "paused", Resources: res}); err != nil {
		t.Fatal(err)
	}
	if got.Status != "paused" || got.Resources != nil {
		t.Fatalf("pause carried resources: %+v", got)
	}
	if _, err := c.UpdateContainer(ctx, &types.UpdateContainerRequest{Id: "x", Resources: res}); err != nil {
		t.Fatal(err)
	}
	if got.Resources == nil || *got.Resources.Memory.Limit != 1<<20 {
		t.Fatalf("resources not passed: %+v", got)
	}
	if _, err := c.UpdateContainer(ctx, &types.UpdateContainerRequest{Id: "x"}); err != nil {
		t.Fatal(err)
	}
	if got.Resources != nil || got.Status != "" {
		t.Fatalf("no-op update: %+v", got)
	}
}

func TestStateHandler(t *testing.T) {
	b := &fakeBackend{state: func(id string) ([]supervisor.ContainerInfo, error) {
		return []supervisor.ContainerInfo{{ID: "a", Status: "running", Pids: []int{10, 11}}}, nil
	}}
	_, c, _ := startServer(t, b)
	resp, err := c.State(context.Background(), &types.StateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetMachine().GetCpus() == 0 || resp.GetMachine().GetMemory() == 0 {
		t.Fatalf("machine not filled: %v", resp.GetMachine())
	}
	if got := resp.GetContainers()[0].GetPids(); len(got) != 2 || got[0] != 10 {
		t.Fatalf("pids %v", got)
	}
}

func TestListCheckpointHandler(t *testing.T) {
	created := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	b := &fakeBackend{listCP: func(id, dir string) ([]runtime.Checkpoint, error) {
		if dir != "/cps" {
			return nil, fmt.Errorf("open %s: %w", dir, errdefs.ErrNotFound)
		}
		return []runtime.Checkpoint{{Name: "cp1", Created: created, CheckpointOpts: runtime.CheckpointOpts{
			Name: "cp1", Exit: true, TCP: true, Shell: true, EmptyNS: []string{"network"}}}}, nil
	}}
	_, c, _ := startServer(t, b)
	resp, err := c.ListCheckpoint(context.Background(), &types.ListCheckpointRequest{Id: "x", CheckpointDir: "/cps"})
	if err != nil {
		t.Fatal(err)
	}
	cp := resp.GetCheckpoints()[0]
	if cp.GetName() != "cp1" || !cp.GetExit() || !cp.GetTcp() || cp.GetUnixSockets() || !cp.GetShell() || cp.GetEmptyNS()[0] != "network" {
		t.Fatalf("checkpoint %v", cp)
	}
	// A missing directory is not "no such containers".
	_, err = c.ListCheckpoint(context.Background(), &types.ListCheckpointRequest{Id: "x", CheckpointDir: "/nope"})
	wantStatus(t, err, codes.NotFound, "open /nope: not found")
}

func TestEventsHandler(t *testing.T) {
	ts := time.Date(2024, 5, 6, 7, 8, 9, 10, time.UTC)
	var got supervisor.SubscribeRequest
	sub := newFakeSub(io.EOF,
		journal.Event{Type: "start-container", ID: "c", Timestamp: ts, Seq: 1},
		journal.Event{Type: "exit", ID: "c", Pid: "init", Status: 3, Timestamp: ts.Add(1), Seq: 2})
	b := &fakeBackend{subscribe: func(r supervisor.SubscribeRequest) (subscription, error) { got = r; return sub, nil }}
	_, c, _ := startServer(t, b)
	stream, err := c.Events(context.Background(), &types.EventsRequest{
		Timestamp: timestamppb.New(ts.Add(-time.Hour)), StoredOnly: true, Id: "c", JournalId: "ignored-without-afterSeq"})
	if err != nil {
		t.Fatal(err)
	}
	var evs []*types.Event
	for {
		ev, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	if !got.After.Equal(ts.Add(-time.Hour)) || !got.StoredOnly || got.ID != "c" {
		t.Fatalf("subscribe request %+v", got)
	}
	if len(evs) != 2 || evs[1].GetType() != "exit" || evs[1].GetPid() != "init" || evs[1].GetStatus() != 3 ||
		evs[1].GetSeq() != 2 || !evs[1].GetTimestamp().AsTime().Equal(ts.Add(1)) || evs[0].GetPid() != "" ||
		evs[0].GetJournalId() != (&fakeBackend{}).JournalID() {
		t.Fatalf("events %v", evs)
	}
}

func TestEventsStoredOnlyWithoutTimestamp(t *testing.T) {
	_, c, _ := startServer(t, &fakeBackend{})
	stream, err := c.Events(context.Background(), &types.EventsRequest{StoredOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	wantStatus(t, err, codes.InvalidArgument,
		"invalid parameter: StoredOnly cannot be specified without setting a valid Timestamp")
}

func TestEventsLag(t *testing.T) {
	lag := &supervisor.LagError{LastSeq: 7, LastTimestamp: time.Unix(100, 0)}
	sub := newFakeSub(lag, journal.Event{Type: "oom", ID: "c", Seq: 7})
	_, c, _ := startServer(t, &fakeBackend{subscribe: func(supervisor.SubscribeRequest) (subscription, error) { return sub, nil }})
	stream, err := c.Events(context.Background(), &types.EventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	wantStatus(t, err, codes.Unavailable, lag.Error())
}

// A client that goes away is unsubscribed at once, without waiting for an event.
func TestEventsClientGone(t *testing.T) {
	sub := newFakeSub(nil)
	subscribed := make(chan struct{})
	_, c, _ := startServer(t, &fakeBackend{subscribe: func(supervisor.SubscribeRequest) (subscription, error) {
		close(subscribed)
		return sub, nil
	}})
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := c.Events(ctx, &types.EventsRequest{}); err != nil {
		t.Fatal(err)
	}
	<-subscribed
	cancel()
	select {
	case <-sub.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("subscription not closed after the client went away")
	}
}

// TestStateReplyBounded: the most labels one container may have pass, and
// a State of the containers that fit under the client's 4 MiB is answered;
// one more container gives a clear ResourceExhausted naming the limit
// instead of a reply every v0.2 client fails to receive.
func TestStateReplyBounded(t *testing.T) {
	var labels []string
	for i := 0; i < maxLabels; i++ {
		labels = append(labels, fmt.Sprintf("%0*d", maxLabelBytes/maxLabels-labelOverhead, i))
	}
	if err := validateLabels(labels); err != nil {
		t.Fatalf("the largest allowed labels: %v", err)
	}
	if err := validateLabels(append(labels, "")); !errdefs.IsInvalidArgument(err) {
		t.Fatalf("one label more: %v, want InvalidArgument", err)
	}
	if err := validateLabels(make([]string, 1_900_000)); !errdefs.IsInvalidArgument(err) {
		t.Fatalf("1.9 million empty labels: %v, want InvalidArgument", err)
	}
	n := 0
	b := &fakeBackend{state: func(string) ([]supervisor.ContainerInfo, error) {
		infos := make([]supervisor.ContainerInfo, n)
		for i := range infos {
			infos[i] = supervisor.ContainerInfo{ID: fmt.Sprint("c", i), Status: "running", Labels: labels}
		}
		return infos, nil
	}}
	_, c, _ := startServer(t, b)
	n = maxStateReply / (maxLabelBytes + 1024)
	if resp, err := c.State(context.Background(), &types.StateRequest{}); err != nil || len(resp.Containers) != n {
		t.Fatalf("State of %d containers with the most labels: %v", n, err)
	}
	n = 4<<20/(maxLabelBytes-maxLabels*labelOverhead) + 1
	_, err := c.State(context.Background(), &types.StateRequest{})
	if st, _ := status.FromError(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "(4 MiB) clients accept") {
		t.Fatalf("State of %d containers with the most labels: %v, want ResourceExhausted naming the limit", n, err)
	}
}
