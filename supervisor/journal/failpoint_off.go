//go:build !failpoints

package journal

// failpoints is a test-only hook: built with -tags failpoints (failpoint.go,
// which `make test` uses) it stops a file operation at a named step as if
// the process died there. In the daemon it is empty and its calls compile to
// nothing.
type failpoints struct{}

func (*failpoints) crash(compactStep) bool { return false }

func (*failpoints) halted() error { return nil }
