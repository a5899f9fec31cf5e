// Package errmark classifies an error without changing its text.
//
// The error classes are github.com/containerd/errdefs' sentinels
// (errdefs.ErrNotFound...; context.DeadlineExceeded for a timeout), wrapped
// with context and %w by the code below the API; only the API edge turns a
// class into a gRPC code (api.ToGRPC). Some texts must stay exactly as
// containerd v0.2.9 wrote them, because clients compare them byte for byte
// (docs/api.md 3.0), and some are the OS's own ("mkdir …: file exists"):
// wrapping with fmt.Errorf would change them, and errdefs' WithMessage would
// hide the original error from errors.As. Mark does neither.
package errmark

// Mark returns an error whose text is exactly err.Error() and which matches
// both class and err under errors.Is and errors.As:
//
//	var ErrContainerNotFound = errmark.Mark(
//		errors.New("containerd: container not found"), errdefs.ErrNotFound)
//
// The class comes first in the chain, so errdefs.Resolve (and so the gRPC
// code) takes it over any class err may carry. Mark(nil, class) is nil.
func Mark(err, class error) error {
	if err == nil {
		return nil
	}
	return &marked{err: err, class: class}
}

// marked is an error carrying a class without changing its text.
type marked struct {
	err   error // the error as the client must see it
	class error // an errdefs sentinel or context.DeadlineExceeded
}

func (m *marked) Error() string   { return m.err.Error() }
func (m *marked) Unwrap() []error { return []error{m.class, m.err} }
