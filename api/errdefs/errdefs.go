// Package errdefs defines the error classes shared by the runtime, the
// supervisor and the API server.
//
// Code below the API classifies a failure by wrapping one of the sentinels
// (fmt.Errorf("container %q: %w", id, errdefs.ErrNotFound)), or by marking an
// error whose text must stay exact (see Mark). Only the API edge turns a class
// into a gRPC code (api.ToGRPC); nothing else inspects error text.
//
// This package depends on the standard library only.
package errdefs

import "errors"

// The error classes. Test for them with errors.Is or the Is* helpers, never by
// comparing text.
var (
	// ErrNotFound: the named container, process or checkpoint does not exist.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: the id or name is already in use.
	ErrAlreadyExists = errors.New("already exists")
	// ErrInvalidArgument: the request itself is malformed (missing or bad field).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrFailedPrecondition: the request is valid but the object's state forbids it.
	ErrFailedPrecondition = errors.New("failed precondition")
	// ErrUnavailable: the daemon cannot serve the request now (starting, stopping).
	ErrUnavailable = errors.New("unavailable")
	// ErrDeadlineExceeded: an internal wait (e.g. for a pid file) timed out.
	ErrDeadlineExceeded = errors.New("deadline exceeded")
	// ErrResourceExhausted: the answer or the request exceeds a size limit.
	ErrResourceExhausted = errors.New("resource exhausted")
	// ErrInternal: a failure of the daemon or the runtime that the client cannot fix.
	ErrInternal = errors.New("internal")
)

// IsNotFound reports whether err is classified as ErrNotFound.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsAlreadyExists reports whether err is classified as ErrAlreadyExists.
func IsAlreadyExists(err error) bool { return errors.Is(err, ErrAlreadyExists) }

// IsInvalidArgument reports whether err is classified as ErrInvalidArgument.
func IsInvalidArgument(err error) bool { return errors.Is(err, ErrInvalidArgument) }

// IsFailedPrecondition reports whether err is classified as ErrFailedPrecondition.
func IsFailedPrecondition(err error) bool { return errors.Is(err, ErrFailedPrecondition) }

// IsUnavailable reports whether err is classified as ErrUnavailable.
func IsUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) }

// IsDeadlineExceeded reports whether err is classified as ErrDeadlineExceeded.
// It does not match context.DeadlineExceeded; api.ToGRPC maps both.
func IsDeadlineExceeded(err error) bool { return errors.Is(err, ErrDeadlineExceeded) }

// IsInternal reports whether err is classified as ErrInternal.
func IsInternal(err error) bool { return errors.Is(err, ErrInternal) }

// Mark returns an error whose text is exactly err.Error() and which matches
// both err and class under errors.Is and errors.As. Use it for the v0.2.9
// messages that clients compare byte for byte, where wrapping with
// fmt.Errorf would change the text:
//
//	var ErrContainerNotFound = errdefs.Mark(
//		errors.New("containerd: container not found"), errdefs.ErrNotFound)
//
// Mark(nil, class) is nil.
func Mark(err, class error) error {
	if err == nil {
		return nil
	}
	return &marked{err: err, class: class}
}

// marked is an error carrying a class without changing its text.
type marked struct {
	err   error // the error as the client must see it
	class error // one of the sentinels above
}

func (m *marked) Error() string   { return m.err.Error() }
func (m *marked) Unwrap() []error { return []error{m.err, m.class} }
