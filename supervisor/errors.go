package supervisor

import (
	"errors"
	"fmt"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/internal/errmark"
)

// Errors whose texts v0.2 clients match byte for byte (docs/api.md 3.0).
var (
	ErrContainerNotFound = errmark.Mark(errors.New("containerd: container not found"), errdefs.ErrNotFound)
	ErrProcessNotFound   = errmark.Mark(errors.New("containerd: process not found for container"), errdefs.ErrNotFound)
	// The trailing space is part of the v0.2 message.
	ErrUnknownContainerStatus = errmark.Mark(errors.New("containerd: unknown container status "), errdefs.ErrInvalidArgument)
	ErrContainerNotRunning    = errmark.Mark(errors.New("containerd: container not running"), errdefs.ErrFailedPrecondition)
	ErrStoredOnlyNeedsTime    = errmark.Mark(errors.New("invalid parameter: StoredOnly cannot be specified without setting a valid Timestamp"), errdefs.ErrInvalidArgument)
	// ErrStopped is returned to requests that arrive while the supervisor shuts down.
	ErrStopped = errmark.Mark(errors.New("containerd: supervisor is stopping"), errdefs.ErrUnavailable)
)

// LagError ends a subscription whose client did not keep up. It names the
// last event delivered, so the client can resume from the journal without a
// gap: by sequence (AfterSeq) or by timestamp (strictly after LastTimestamp).
type LagError struct {
	LastSeq       uint64
	LastTimestamp time.Time
}

func (e *LagError) Error() string {
	return fmt.Sprintf("containerd: subscriber too slow, events dropped: resume after seq %d (timestamp %s)",
		e.LastSeq, e.LastTimestamp.Format(time.RFC3339Nano))
}

// Is classifies a lag as unavailable: the client can retry by resuming.
func (e *LagError) Is(target error) bool { return target == errdefs.ErrUnavailable }
