//go:build failpoints

package journal

// failpoints, in tests built with -tags failpoints, stop a file operation of
// the journal at a named step as if the process died there: no cleanup, no
// rollback, and every later write fails. The daemon is built without the tag
// and gets the empty one of failpoint_off.go.
type failpoints struct {
	// crashAt, when it returns true for a step, is the crash (set through
	// Options by the tests).
	crashAt func(compactStep) bool
	halt    error // errSimulatedCrash once crashAt fired
}

// crash reports whether the test wants the process "dead" at step; from then
// on every write fails, as nothing more would happen.
func (f *failpoints) crash(step compactStep) bool {
	if f.crashAt == nil || !f.crashAt(step) {
		return false
	}
	f.halt = errSimulatedCrash
	return true
}

// halted is errSimulatedCrash after a simulated crash, else nil.
func (f *failpoints) halted() error { return f.halt }
