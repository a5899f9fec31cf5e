// Package api is the gRPC edge of the daemon. Errors are classified below it
// (package errdefs) and turned into gRPC statuses here, in one place.
package api

import (
	"context"
	"errors"
	"io/fs"

	"github.com/evjournal/containerd/api/errdefs"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// classes maps error classes to gRPC codes, first match wins. Sentinels come
// first; the fs errors keep the codes v0.2.9 gave raw OS errors (docs/api.md
// 1.4: e.g. "mkdir …: file exists" is AlreadyExists).
var classes = []struct {
	class error
	code  codes.Code
}{
	{errdefs.ErrNotFound, codes.NotFound},
	{errdefs.ErrAlreadyExists, codes.AlreadyExists},
	{errdefs.ErrInvalidArgument, codes.InvalidArgument},
	{errdefs.ErrFailedPrecondition, codes.FailedPrecondition},
	{errdefs.ErrUnavailable, codes.Unavailable},
	{errdefs.ErrDeadlineExceeded, codes.DeadlineExceeded},
	{errdefs.ErrResourceExhausted, codes.ResourceExhausted},
	{errdefs.ErrInternal, codes.Internal},
	{context.Canceled, codes.Canceled},
	{context.DeadlineExceeded, codes.DeadlineExceeded},
	{fs.ErrNotExist, codes.NotFound},
	{fs.ErrExist, codes.AlreadyExists},
	{fs.ErrPermission, codes.PermissionDenied},
}

// ToGRPC converts an error returned below the API into the error a handler
// returns. The status message is exactly err.Error(): v0.2 clients match on
// message text only (docs/api.md 1.4 and 3.0), so the text must survive
// byte for byte. The code comes from the error's class (see classes); an
// unclassified error gets Unknown, as in v0.2.9.
//
// An error that is itself a gRPC status error is returned unchanged. A status
// error wrapped inside another error keeps its code but takes the outer text.
// ToGRPC(nil) is nil.
func ToGRPC(err error) error {
	if err == nil {
		return nil
	}
	if se, ok := err.(grpcStatuser); ok && validStatus(se) {
		return err
	}
	return status.Error(Code(err), err.Error())
}

// Code returns the gRPC code ToGRPC gives err: codes.OK for nil, the code of
// its class, the code of a wrapped status error, or codes.Unknown. It never
// returns codes.OK for a non-nil error.
func Code(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	for _, c := range classes {
		if errors.Is(err, c.class) {
			return c.code
		}
	}
	var se grpcStatuser
	if errors.As(err, &se) && validStatus(se) {
		return se.GRPCStatus().Code()
	}
	return codes.Unknown
}

// grpcStatuser is implemented by gRPC status errors (and by errors of other
// packages that carry a status).
type grpcStatuser interface{ GRPCStatus() *status.Status }

// validStatus reports whether se carries a usable failure status: a nil or OK
// status on a non-nil error must not turn the failure into a success.
func validStatus(se grpcStatuser) bool {
	s := se.GRPCStatus()
	return s != nil && s.Code() != codes.OK
}
