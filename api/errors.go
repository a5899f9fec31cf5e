// Package api is the gRPC edge of the daemon. Errors are classified below it
// with github.com/containerd/errdefs' sentinels (internal/errmark where a
// text must stay exact) and turned into gRPC statuses here, in one place.
package api

import (
	"context"
	"errors"
	"io/fs"

	"github.com/containerd/errdefs"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// classCodes maps the classes errdefs.Resolve returns to gRPC codes, as
// errdefs' own pkg/errgrpc does. That package is not used: it attaches every
// error an errmark.Mark wraps as a google.rpc.Status detail (a second copy of
// the message, with code Unknown) to the reply, and gives raw OS errors
// Unknown; v0.2.9 sent neither detail nor Unknown for those (docs/api.md 1.4).
var classCodes = map[error]codes.Code{
	errdefs.ErrInvalidArgument:    codes.InvalidArgument,
	errdefs.ErrNotFound:           codes.NotFound,
	errdefs.ErrAlreadyExists:      codes.AlreadyExists,
	errdefs.ErrPermissionDenied:   codes.PermissionDenied,
	errdefs.ErrResourceExhausted:  codes.ResourceExhausted,
	errdefs.ErrFailedPrecondition: codes.FailedPrecondition,
	errdefs.ErrConflict:           codes.FailedPrecondition,
	errdefs.ErrNotModified:        codes.FailedPrecondition,
	errdefs.ErrAborted:            codes.Aborted,
	errdefs.ErrOutOfRange:         codes.OutOfRange,
	errdefs.ErrNotImplemented:     codes.Unimplemented,
	errdefs.ErrInternal:           codes.Internal,
	errdefs.ErrUnavailable:        codes.Unavailable,
	errdefs.ErrDataLoss:           codes.DataLoss,
	errdefs.ErrUnauthenticated:    codes.Unauthenticated,
	context.DeadlineExceeded:      codes.DeadlineExceeded,
	context.Canceled:              codes.Canceled,
}

// fsCodes keeps the codes v0.2.9 gave raw OS errors (docs/api.md 1.4: e.g.
// "mkdir …: file exists" is AlreadyExists), for an error of no class.
var fsCodes = []struct {
	err  error
	code codes.Code
}{
	{fs.ErrNotExist, codes.NotFound},
	{fs.ErrExist, codes.AlreadyExists},
	{fs.ErrPermission, codes.PermissionDenied},
}

// ToGRPC converts an error returned below the API into the error a handler
// returns. The status message is exactly err.Error(): v0.2 clients match on
// message text only (docs/api.md 1.4 and 3.0), so the text must survive
// byte for byte. The code comes from the error's class (see Code); an
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
// its errdefs class (the outermost one, errdefs.Resolve), else the code of a
// raw OS error, else the code of a wrapped status error, or codes.Unknown. It
// never returns codes.OK for a non-nil error.
func Code(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	if c, ok := ClassCode(err); ok {
		return c
	}
	for _, f := range fsCodes {
		if errors.Is(err, f.err) {
			return f.code
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

// ClassCode is the gRPC code of err's errdefs class (the outermost one,
// errdefs.Resolve; context errors included), when it has one: the mapping
// every gRPC edge of the daemon (0.2 API, CRI) shares.
func ClassCode(err error) (codes.Code, bool) {
	c, ok := classCodes[errdefs.Resolve(err)]
	return c, ok
}
