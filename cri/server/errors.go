package server

import (
	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/api"
)

var errUnavailable = errdefs.ErrUnavailable

// toStatus makes the gRPC status a CRI client sees: the code of the error's
// errdefs class (kubelet branches on NotFound, AlreadyExists,
// Unimplemented), the error's text as the message; the 0.2 API's mapping,
// one for the whole daemon.
func toStatus(err error) error { return api.ToGRPC(err) }
