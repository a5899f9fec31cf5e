package server

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/api"
	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/supervisor"
	"google.golang.org/protobuf/proto"
)

// maxSignal is the largest Linux signal number (SIGRTMAX).
const maxSignal = 64

// CreateContainer starts a container. The supervisor journals and publishes
// start-container before it returns, so the reply never precedes the event
// (docs/api.md 3.14).
func (s *Server) CreateContainer(ctx context.Context, r *types.CreateContainerRequest) (*types.CreateContainerResponse, error) {
	if r.GetBundlePath() == "" {
		return nil, api.ToGRPC(errEmptyBundle)
	}
	if err := validateCreate(r); err != nil {
		return nil, api.ToGRPC(err)
	}
	info, err := s.sup.CreateContainer(ctx, createRequest(r))
	if err != nil {
		return nil, api.ToGRPC(err)
	}
	return &types.CreateContainerResponse{Container: containerToProto(info)}, nil
}

// Label bounds: State echoes every container's labels in one reply, which
// must stay under the 4 MiB message limit of v0.2 clients. Labels are
// counted as well as measured, since an empty label costs bytes on the wire
// (and in state.json) too: each counts labelOverhead bytes besides its text.
const (
	maxLabels     = 256
	maxLabelBytes = 64 << 10
	labelOverhead = 8
)

// validateCreate checks what would otherwise fail late, or not at all: the
// labels, the checkpoint name and dir (joined into paths), the stdio paths.
func validateCreate(r *types.CreateContainerRequest) error {
	if err := validateLabels(r.GetLabels()); err != nil {
		return err
	}
	if cp := r.GetCheckpoint(); cp != "" {
		if err := runtime.ValidateID(cp); err != nil {
			return fmt.Errorf("checkpoint name: %w", err)
		}
	}
	if err := absoluteDir("checkpointDir", r.GetCheckpointDir()); err != nil {
		return err
	}
	return runtime.ValidateStdio(runtime.Stdio{Stdin: r.GetStdin(), Stdout: r.GetStdout(), Stderr: r.GetStderr()})
}

func validateLabels(labels []string) error {
	if len(labels) > maxLabels {
		return fmt.Errorf("labels: %d of them, more than the %d allowed: %w", len(labels), maxLabels, errdefs.ErrInvalidArgument)
	}
	n := 0
	for _, l := range labels {
		n += len(l) + labelOverhead
	}
	if n > maxLabelBytes {
		return fmt.Errorf("labels: %d bytes in all (counting %d per label), more than the %d allowed: %w",
			n, labelOverhead, maxLabelBytes, errdefs.ErrInvalidArgument)
	}
	return nil
}

// absoluteDir rejects a relative directory: it would be resolved against
// the daemon's working directory.
func absoluteDir(field, dir string) error {
	if dir != "" && !filepath.IsAbs(dir) {
		return fmt.Errorf("%s %q is not an absolute path: %w", field, dir, errdefs.ErrInvalidArgument)
	}
	return nil
}

// createRequest converts the request field by field (docs/api.md 2.3).
func createRequest(r *types.CreateContainerRequest) supervisor.CreateRequest {
	return supervisor.CreateRequest{
		ID:            r.GetId(),
		Bundle:        r.GetBundlePath(),
		Stdio:         runtime.Stdio{Stdin: r.GetStdin(), Stdout: r.GetStdout(), Stderr: r.GetStderr()},
		Labels:        r.GetLabels(),
		NoPivotRoot:   r.GetNoPivotRoot(),
		Runtime:       r.GetRuntime(),
		RuntimeArgs:   r.GetRuntimeArgs(),
		Checkpoint:    r.GetCheckpoint(),
		CheckpointDir: r.GetCheckpointDir(),
	}
}

// State lists one container (id set) or all, plus the host's facts.
func (s *Server) State(ctx context.Context, r *types.StateRequest) (*types.StateResponse, error) {
	leave, err := s.state.enter(ctx)
	if err != nil {
		return nil, api.ToGRPC(err)
	}
	defer leave()
	infos, err := s.sup.State(ctx, r.GetId())
	if err != nil {
		return nil, api.ToGRPC(err)
	}
	resp := &types.StateResponse{Machine: s.machine}
	for _, info := range infos {
		resp.Containers = append(resp.Containers, containerToProto(info))
	}
	if err := checkReplySize(resp); err != nil {
		return nil, api.ToGRPC(err)
	}
	return resp, nil
}

// maxStateReply is the largest State reply sent: the 4 MiB a v0.2 client
// (grpc's default) accepts, less room for the framing. A larger reply would
// fail in every client as a transport error; this one names the limit.
const maxStateReply = 4<<20 - 4<<10

func checkReplySize(resp *types.StateResponse) error {
	n := proto.Size(resp)
	if n <= maxStateReply {
		return nil
	}
	return fmt.Errorf("state of %d containers would be a %d-byte reply, more than the %d bytes (4 MiB) clients accept: "+
		"ask for one container by id, or remove containers: %w", len(resp.Containers), n, maxStateReply, errdefs.ErrResourceExhausted)
}

// UpdateContainer pauses ("paused"), resumes ("running") or, with an empty
// status, changes resources (docs/api.md 3.3). With a status set, resources
// are ignored; the supervisor rejects unknown statuses after looking the
// container up, in v0.2.9's order.
func (s *Server) UpdateContainer(ctx context.Context, r *types.UpdateContainerRequest) (*types.UpdateContainerResponse, error) {
	req := supervisor.UpdateRequest{ID: r.GetId(), Status: r.GetStatus()}
	if req.Status == "" && r.GetResources() != nil {
		res, err := resourcesFromProto(r.GetResources())
		if err != nil {
			return nil, api.ToGRPC(err)
		}
		req.Resources = res
	}
	if err := s.sup.Update(ctx, req); err != nil {
		return nil, api.ToGRPC(err)
	}
	return &types.UpdateContainerResponse{}, nil
}

// Signal sends a signal to one process of a container (docs/api.md 3.4).
func (s *Server) Signal(ctx context.Context, r *types.SignalRequest) (*types.SignalResponse, error) {
	if r.GetSignal() > maxSignal {
		return nil, api.ToGRPC(fmt.Errorf("invalid signal %d: %w", r.GetSignal(), errdefs.ErrInvalidArgument))
	}
	if err := s.sup.Signal(ctx, r.GetId(), r.GetPid(), syscall.Signal(r.GetSignal())); err != nil {
		return nil, api.ToGRPC(err)
	}
	return &types.SignalResponse{}, nil
}

// UpdateProcess closes a process's stdin and/or resizes its pty (docs/api.md 3.5).
func (s *Server) UpdateProcess(ctx context.Context, r *types.UpdateProcessRequest) (*types.UpdateProcessResponse, error) {
	err := s.sup.UpdateProcess(ctx, supervisor.ProcessUpdate{
		ID:         r.GetId(),
		Pid:        r.GetPid(),
		CloseStdin: r.GetCloseStdin(),
		Width:      r.GetWidth(),
		Height:     r.GetHeight(),
	})
	if err != nil {
		return nil, api.ToGRPC(err)
	}
	return &types.UpdateProcessResponse{}, nil
}
