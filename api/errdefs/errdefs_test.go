package errdefs

import (
	"errors"
	"fmt"
	"go/build"
	"strings"
	"testing"
)

func TestIsHelpers(t *testing.T) {
	helpers := []struct {
		name     string
		sentinel error
		is       func(error) bool
	}{
		{"NotFound", ErrNotFound, IsNotFound},
		{"AlreadyExists", ErrAlreadyExists, IsAlreadyExists},
		{"InvalidArgument", ErrInvalidArgument, IsInvalidArgument},
		{"FailedPrecondition", ErrFailedPrecondition, IsFailedPrecondition},
		{"Unavailable", ErrUnavailable, IsUnavailable},
		{"DeadlineExceeded", ErrDeadlineExceeded, IsDeadlineExceeded},
		{"Internal", ErrInternal, IsInternal},
	}
	for _, h := range helpers {
		t.Run(h.name, func(t *testing.T) {
			cases := map[string]error{
				"bare":    h.sentinel,
				"wrapped": fmt.Errorf("container %q: %w", "c1", h.sentinel),
				"twice":   fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", h.sentinel)),
				"marked":  Mark(errors.New("exact text"), h.sentinel),
				"joined":  errors.Join(errors.New("other"), h.sentinel),
			}
			for name, err := range cases {
				if !h.is(err) {
					t.Errorf("%s: Is%s(%v) = false, want true", name, h.name, err)
				}
			}
			if h.is(nil) {
				t.Errorf("Is%s(nil) = true", h.name)
			}
			if h.is(errors.New(h.sentinel.Error())) {
				t.Errorf("Is%s matched an unrelated error with the same text", h.name)
			}
			for _, other := range helpers {
				if other.name != h.name && h.is(other.sentinel) {
					t.Errorf("Is%s(%v) = true", h.name, other.sentinel)
				}
			}
		})
	}
}

func TestMark(t *testing.T) {
	base := errors.New("containerd: container not found")
	err := Mark(base, ErrNotFound)
	if got := err.Error(); got != "containerd: container not found" {
		t.Errorf("text = %q", got)
	}
	if !errors.Is(err, base) || !errors.Is(err, ErrNotFound) {
		t.Errorf("Mark lost a link: Is(base)=%v Is(class)=%v", errors.Is(err, base), errors.Is(err, ErrNotFound))
	}
	if IsAlreadyExists(err) {
		t.Error("marked error matched another class")
	}
	// Wrapping a marked error keeps the class.
	if !IsNotFound(fmt.Errorf("state: %w", err)) {
		t.Error("class lost through fmt.Errorf")
	}
	if Mark(nil, ErrNotFound) != nil {
		t.Error("Mark(nil) != nil")
	}
	// errors.As reaches the original error.
	var pe *testErr
	if !errors.As(Mark(&testErr{"x"}, ErrInternal), &pe) || pe.s != "x" {
		t.Error("errors.As did not reach the marked error")
	}
}

type testErr struct{ s string }

func (e *testErr) Error() string { return e.s }

// TestStdlibOnly guards the package contract: runtime and supervisor import
// errdefs, so it must not pull in anything beyond the standard library.
func TestStdlibOnly(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if first, _, _ := strings.Cut(imp, "/"); strings.Contains(first, ".") {
			t.Errorf("errdefs imports %q; only the standard library is allowed", imp)
		}
	}
}
