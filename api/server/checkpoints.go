package server

import (
	"context"
	"errors"

	"github.com/evjournal/containerd/api"
	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/supervisor"
)

// CreateCheckpoint checkpoints a container into checkpointDir/name
// (checkpointDir "" = <bundle>/checkpoints). No event (docs/api.md 3.7).
func (s *Server) CreateCheckpoint(ctx context.Context, r *types.CreateCheckpointRequest) (*types.CreateCheckpointResponse, error) {
	switch {
	case r.GetCheckpoint() == nil:
		return nil, api.ToGRPC(errNoCheckpoint)
	case r.GetCheckpoint().GetName() == "":
		return nil, api.ToGRPC(errEmptyCheckpointName)
	}
	if err := absoluteDir("checkpointDir", r.GetCheckpointDir()); err != nil {
		return nil, api.ToGRPC(err)
	}
	if err := s.sup.CreateCheckpoint(ctx, r.GetId(), r.GetCheckpointDir(), checkpointOpts(r.GetCheckpoint())); err != nil {
		return nil, api.ToGRPC(err)
	}
	return &types.CreateCheckpointResponse{}, nil
}

// DeleteCheckpoint removes one checkpoint; a missing one is success (docs/api.md 3.8).
func (s *Server) DeleteCheckpoint(ctx context.Context, r *types.DeleteCheckpointRequest) (*types.DeleteCheckpointResponse, error) {
	if r.GetName() == "" {
		return nil, api.ToGRPC(errEmptyCheckpointName)
	}
	if err := absoluteDir("checkpointDir", r.GetCheckpointDir()); err != nil {
		return nil, api.ToGRPC(err)
	}
	if err := s.sup.DeleteCheckpoint(ctx, r.GetId(), r.GetCheckpointDir(), r.GetName()); err != nil {
		return nil, api.ToGRPC(err)
	}
	return &types.DeleteCheckpointResponse{}, nil
}

// ListCheckpoint lists a container's checkpoints. An unknown container gets
// v0.2.9's own text for this RPC, `no such containers` (docs/api.md 3.9).
func (s *Server) ListCheckpoint(ctx context.Context, r *types.ListCheckpointRequest) (*types.ListCheckpointResponse, error) {
	if err := absoluteDir("checkpointDir", r.GetCheckpointDir()); err != nil {
		return nil, api.ToGRPC(err)
	}
	cps, err := s.sup.ListCheckpoints(ctx, r.GetId(), r.GetCheckpointDir())
	if errors.Is(err, supervisor.ErrContainerNotFound) {
		err = errNoSuchContainers
	}
	if err != nil {
		return nil, api.ToGRPC(err)
	}
	resp := &types.ListCheckpointResponse{}
	for _, c := range cps {
		resp.Checkpoints = append(resp.Checkpoints, checkpointToProto(c))
	}
	return resp, nil
}
