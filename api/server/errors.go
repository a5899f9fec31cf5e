package server

import (
	"errors"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/internal/errmark"
)

// Request validation errors. The texts marked v0.2.9 are matched byte for
// byte by clients (docs/api.md 3.0); v0.2.9 sent them as Unknown, we give the
// more precise code their class maps to (docs/api.md 1.4 allows it).
var (
	errEmptyBundle         = invalid("empty bundle path")               // v0.2.9
	errEmptyContainerID    = invalid("container id cannot be empty")    // v0.2.9
	errEmptyProcessID      = invalid("process id cannot be empty")      // v0.2.9
	errEmptyCheckpointName = invalid("checkpoint name cannot be empty") // v0.2.9
	// v0.2.9 crashed on these two (docs/api.md 9.1).
	errNoUser       = invalid("process user cannot be empty")
	errNoCheckpoint = invalid("checkpoint cannot be empty")
	// ListCheckpoint's own not-found text, the only NotFound of v0.2.9.
	errNoSuchContainers = errmark.Mark(errors.New("no such containers"), errdefs.ErrNotFound)
)

func invalid(msg string) error {
	return errmark.Mark(errors.New(msg), errdefs.ErrInvalidArgument)
}
