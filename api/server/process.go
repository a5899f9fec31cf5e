package server

import (
	"context"
	"fmt"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/api"
	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/runtime"
)

// AddProcess execs a process in a running container (docs/api.md 3.6). The
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
	total := 0
	for _, list := range []struct {
		name string
		vals []string
	}{{"args", r.GetArgs()}, {"env", r.GetEnv()}} {
		for i, v := range list.vals {
			if len(v) > maxArgLen {
				return fmt.Errorf("%s[%d]: %d bytes, more than the kernel accepts (%d): %w",
					list.name, i, len(v), maxArgLen, errdefs.ErrInvalidArgument)
			}
			total += len(v) + labelOverhead
		}
	}
	if total > maxExecArgBytes {
		return fmt.Errorf("args and env: %d bytes in all (counting %d per string), more than the %d allowed: %w",
			total, labelOverhead, maxExecArgBytes, errdefs.ErrInvalidArgument)
	}
	return runtime.ValidateStdio(runtime.Stdio{Stdin: r.GetStdin(), Stdout: r.GetStdout(), Stderr: r.GetStderr()})
}

// maxExecArgBytes bounds an exec's args and env together: State echoes
// them for every process, in one reply that must stay under 4 MiB.
const maxExecArgBytes = 256 << 10

// maxArgLen is the kernel's limit on one argument or environment string
// (MAX_ARG_STRLEN): execve fails with E2BIG beyond it, after the runtime
// has already reported the process started.
const maxArgLen = 32 * 4096
