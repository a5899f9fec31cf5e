package imagesvc

import (
	"context"
	"errors"

	"github.com/evjournal/containerd/api"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ToStatus turns an error from below the CRI edge into the error a handler
// returns: a gRPC status whose message is err.Error() and whose code is
// err's errdefs class (the outermost one, context errors included). An
// unclassified error wrapping a status keeps that status's code; any other
// unclassified error is Internal: every failure the
// request could cause (bad name, missing image, credentials, registry down)
// is classified by the image store, so what is left is the daemon's own
// failure (disk, bug). ToStatus(nil) is nil.
//
// It differs from api.ToGRPC on purpose: no Unknown for unclassified errors
// (v0.2 compatibility) and no codes guessed from raw OS errors, whose
// ENOENT on a store file would read as "image not found".
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	if c, ok := api.ClassCode(err); ok {
		return status.Error(c, err.Error())
	}
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) && se.GRPCStatus().Code() != codes.OK {
		return status.Error(se.GRPCStatus().Code(), err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// requestStatus is ToStatus for a failure of the request whose context is
// ctx: once the client's deadline passed or it went away, that is the code,
// whatever the failure it caused looked like below (a pull cut short mid-layer
// is classified Unavailable by the store).
func requestStatus(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	switch ctx.Err() {
	case context.DeadlineExceeded:
		return status.Error(codes.DeadlineExceeded, err.Error())
	case context.Canceled:
		return status.Error(codes.Canceled, err.Error())
	}
	return ToStatus(err)
}
