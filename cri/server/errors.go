package server

import (
	"errors"
	"syscall"

	"github.com/evjournal/containerd/api"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// toStatus makes the gRPC status a CRI client sees: the code of the error's
// errdefs class (kubelet branches on NotFound, AlreadyExists,
// Unimplemented), the error's text as the message; the 0.2 API's mapping,
// one for the whole daemon. A full disk or quota that nothing classified
// is ResourceExhausted here (the 0.2 API keeps v0.2.9's Unknown for it).
func toStatus(err error) error {
	if _, classified := api.ClassCode(err); !classified && (errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)) {
		return status.Error(codes.ResourceExhausted, err.Error())
	}
	return api.ToGRPC(err)
}
