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
	halted  error // errSimulatedCrash once crashAt fired
}

// crash reports whether a test wants the process "dead" at step; from then
// on every write fails, as nothing more would happen.
func (j *Journal) crash(step compactStep) bool {
	fp := &j.opts.failpoints
	if fp.crashAt == nil || !fp.crashAt(step) {
		return false
	}
	fp.halted = errSimulatedCrash
	return true
}

// halted is errSimulatedCrash after a simulated crash, else nil.
func (j *Journal) halted() error { return j.opts.failpoints.halted }
