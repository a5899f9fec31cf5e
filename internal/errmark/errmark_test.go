package errmark

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/containerd/errdefs"
)

func TestMark(t *testing.T) {
	base := errors.New("containerd: container not found")
	err := Mark(base, errdefs.ErrNotFound)
	if got := err.Error(); got != "containerd: container not found" {
		t.Errorf("text = %q", got)
	}
	if !errors.Is(err, base) || !errdefs.IsNotFound(err) {
		t.Errorf("Mark lost a link: Is(base)=%v IsNotFound=%v", errors.Is(err, base), errdefs.IsNotFound(err))
	}
	if errdefs.IsAlreadyExists(err) {
		t.Error("marked error matched another class")
	}
	// Wrapping a marked error keeps the class.
	if !errdefs.IsNotFound(fmt.Errorf("state: %w", err)) {
		t.Error("class lost through fmt.Errorf")
	}
	if Mark(nil, errdefs.ErrNotFound) != nil {
		t.Error("Mark(nil) != nil")
	}
	// errors.As reaches the original error.
	var pe *fs.PathError
	if !errors.As(Mark(&fs.PathError{Op: "mkdir", Path: "/x", Err: syscall.EEXIST}, errdefs.ErrAlreadyExists), &pe) || pe.Path != "/x" {
		t.Error("errors.As did not reach the marked error")
	}
}

// The class a caller marked is the one the API edge resolves, before any
// class the marked error carries itself.
func TestMarkResolvesToItsClass(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want error
	}{
		{Mark(errors.New("x"), errdefs.ErrInvalidArgument), errdefs.ErrInvalidArgument},
		{Mark(fmt.Errorf("y: %w", errdefs.ErrNotFound), errdefs.ErrAlreadyExists), errdefs.ErrAlreadyExists},
		{fmt.Errorf("z: %w", Mark(errors.New("t"), context.DeadlineExceeded)), context.DeadlineExceeded},
	} {
		if got := errdefs.Resolve(tc.err); got != tc.want {
			t.Errorf("Resolve(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
