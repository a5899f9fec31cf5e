package server

import (
	"context"

	"github.com/evjournal/containerd/api"
	"github.com/evjournal/containerd/api/types"
)

// AddProcess execs a process in a running container (compat doc 3.6). The
// supervisor publishes start-process before it returns.
func (s *Server) AddProcess(ctx context.Context, r *types.AddProcessRequest) (*types.AddProcessResponse, error) {
	if err := validateAddProcess(r); err != nil {
		return nil, api.ToGRPC(err)
	}
	pid, err := s.sup.Exec(ctx, execRequest(r))
	if err != nil {
		return nil, api.ToGRPC(err)
	}
	return &types.AddProcessResponse{SystemPid: uint32(pid)}, nil
}

// validateAddProcess checks what v0.2.9 checked, in its order, plus the user
// it dereferenced without a check.
func validateAddProcess(r *types.AddProcessRequest) error {
	switch {
	case r.GetId() == "":
		return errEmptyContainerID
	case r.GetPid() == "":
		return errEmptyProcessID
	case r.GetUser() == nil:
		return errNoUser
	}
	return nil
}
