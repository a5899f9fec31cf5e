package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evjournal/containerd/api/types"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// fakeAPI records the requests ctr sends and answers from its fields.
type fakeAPI struct {
	types.UnimplementedAPIServer

	mu       sync.Mutex
	requests []proto.Message
	// recorded is closed (and replaced) at each recorded request, so tests
	// await a request instead of polling for it.
	recorded chan struct{}
	state    *types.StateResponse
	// onCreate runs inside CreateContainer/AddProcess with the request's
	// stdout path, e.g. to write output into ctr's FIFO.
	onCreate func(stdout string)
	// events are sent on every Events stream after the create (or at once
	// when nothing is created); then the stream stays open.
	events  []*types.Event
	created chan struct{}
	// storedOnly streams end after the events.
	stopped chan struct{}
	// readsStdin makes the process one that reads its stdin to the end
	// before it exits (cat): the events are sent only once an
	// UpdateProcess has closed its stdin.
	readsStdin  bool
	stdinClosed chan struct{}
}

func newFakeAPI() *fakeAPI {
	return &fakeAPI{created: make(chan struct{}), stopped: make(chan struct{}), recorded: make(chan struct{}), stdinClosed: make(chan struct{})}
}

func (f *fakeAPI) record(m proto.Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, m)
	close(f.recorded)
	f.recorded = make(chan struct{})
}

// waitFor waits, up to 5 s, until cond holds, re-checking at each request.
func (f *fakeAPI) waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		f.mu.Lock()
		ch := f.recorded
		f.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Error("condition not met in time")
			return
		}
	}
}

// last returns the last recorded request of m's type.
func (f *fakeAPI) last(m proto.Message) proto.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.requests) - 1; i >= 0; i-- {
		if f.requests[i].ProtoReflect().Descriptor() == m.ProtoReflect().Descriptor() {
			return f.requests[i]
		}
	}
	return nil
}

func (f *fakeAPI) markCreated(stdout string) {
	if f.onCreate != nil {
		f.onCreate(stdout)
	}
	close(f.created)
}

func (f *fakeAPI) GetServerVersion(context.Context, *types.GetServerVersionRequest) (*types.GetServerVersionResponse, error) {
	return &types.GetServerVersionResponse{Major: 0, Minor: 2, Patch: 9, Revision: "abc"}, nil
}

func (f *fakeAPI) CreateContainer(_ context.Context, r *types.CreateContainerRequest) (*types.CreateContainerResponse, error) {
	f.record(r)
	f.markCreated(r.GetStdout())
	return &types.CreateContainerResponse{Container: &types.Container{Id: r.GetId()}}, nil
}

func (f *fakeAPI) AddProcess(_ context.Context, r *types.AddProcessRequest) (*types.AddProcessResponse, error) {
	f.record(r)
	f.markCreated(r.GetStdout())
	return &types.AddProcessResponse{SystemPid: 99}, nil
}

func (f *fakeAPI) Signal(_ context.Context, r *types.SignalRequest) (*types.SignalResponse, error) {
	f.record(r)
	return &types.SignalResponse{}, nil
}

func (f *fakeAPI) UpdateContainer(_ context.Context, r *types.UpdateContainerRequest) (*types.UpdateContainerResponse, error) {
	f.record(r)
	return &types.UpdateContainerResponse{}, nil
}

func (f *fakeAPI) UpdateProcess(_ context.Context, r *types.UpdateProcessRequest) (*types.UpdateProcessResponse, error) {
	f.record(r)
	if r.GetCloseStdin() {
		f.mu.Lock()
		select {
		case <-f.stdinClosed:
		default:
			close(f.stdinClosed)
		}
		f.mu.Unlock()
	}
	return &types.UpdateProcessResponse{}, nil
}

func (f *fakeAPI) State(_ context.Context, r *types.StateRequest) (*types.StateResponse, error) {
	f.record(r)
	if f.state == nil {
		return &types.StateResponse{Machine: &types.Machine{Cpus: 1}}, nil
	}
	return f.state, nil
}

func (f *fakeAPI) CreateCheckpoint(_ context.Context, r *types.CreateCheckpointRequest) (*types.CreateCheckpointResponse, error) {
	f.record(r)
	return &types.CreateCheckpointResponse{}, nil
}

func (f *fakeAPI) ListCheckpoint(_ context.Context, r *types.ListCheckpointRequest) (*types.ListCheckpointResponse, error) {
	f.record(r)
	return &types.ListCheckpointResponse{Checkpoints: []*types.Checkpoint{{Name: "cp1", Tcp: true}}}, nil
}

func (f *fakeAPI) Stats(_ context.Context, r *types.StatsRequest) (*types.StatsResponse, error) {
	f.record(r)
	return &types.StatsResponse{CgroupStats: &types.CgroupStats{
		MemoryStats: &types.MemoryStats{Usage: &types.MemoryData{Usage: 8 << 20}},
		PidsStats:   &types.PidsStats{Current: 2},
	}}, nil
}

func (f *fakeAPI) Events(r *types.EventsRequest, s types.API_EventsServer) error {
	f.record(r)
	if !r.GetStoredOnly() {
		select {
		case <-f.created:
		case <-s.Context().Done():
			return nil
		case <-f.stopped:
			return nil
		}
		if f.readsStdin {
			select {
			case <-f.stdinClosed:
			case <-s.Context().Done():
				return nil
			}
		}
	}
	for _, ev := range f.events {
		if err := s.Send(ev); err != nil {
			return err
		}
	}
	if r.GetStoredOnly() {
		return nil
	}
	select {
	case <-s.Context().Done():
	case <-f.stopped:
	}
	return nil
}

// serveFake serves api on a unix socket and returns the --address value.
func serveFake(t *testing.T, api *fakeAPI) (string, *grpc.Server) {
	t.Helper()
	dir, err := os.MkdirTemp("", "ctrtest")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	types.RegisterAPIServer(g, api)
	go g.Serve(lis)
	t.Cleanup(func() {
		select {
		case <-api.stopped:
		default:
			close(api.stopped)
		}
		g.Stop()
	})
	return "unix://" + sock, g
}

// runCtr runs ctr with args and returns its exit code, stdout and stderr.
func runCtr(t *testing.T, in string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	stdin, stdout, stderr = strings.NewReader(in), &out, &errOut
	defer func() { stdin, stdout, stderr = os.Stdin, os.Stdout, os.Stderr }()
	code := exitCode(newApp().Run(append([]string{"ctr"}, args...)), &errOut)
	return code, out.String(), errOut.String()
}

func ts(sec int64) *timestamppb.Timestamp { return &timestamppb.Timestamp{Seconds: sec} }
