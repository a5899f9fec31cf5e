package runtime

import (
	"context"
	"errors"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/internal/errmark"
)

// The start errors v0.2 clients see byte for byte (docs/api.md 3.0). They are
// returned unwrapped so their text stays exact.
var (
	// ErrStartTimeout: the shim reported nothing within StartTimeout.
	ErrStartTimeout = errmark.Mark(errors.New("containerd: container did not start before the specified timeout"), context.DeadlineExceeded)
	// ErrShimExited: the shim closed its start pipe without a report.
	ErrShimExited = errmark.Mark(errors.New("containerd: shim exited before container process was started"), errdefs.ErrInternal)
)

// OCIRuntimeError is a failed runc create, exec or restore, as reported by
// the shim: Msg is runc's own message, verbatim. Classified ErrInternal.
type OCIRuntimeError struct{ Msg string }

func (e *OCIRuntimeError) Error() string { return "oci runtime error: " + e.Msg }

// Is makes errors.Is(err, errdefs.ErrInternal) hold.
func (e *OCIRuntimeError) Is(target error) bool { return target == errdefs.ErrInternal }

// ShimError is the shim's own start failure. Classified ErrInternal.
type ShimError struct{ Msg string }

func (e *ShimError) Error() string { return "shim error: " + e.Msg }

// Is makes errors.Is(err, errdefs.ErrInternal) hold.
func (e *ShimError) Is(target error) bool { return target == errdefs.ErrInternal }

// shimNotInstalled is "<shim> not installed on system".
func shimNotInstalled(shim string) error {
	return errmark.Mark(errors.New(shim+" not installed on system"), errdefs.ErrInternal)
}
