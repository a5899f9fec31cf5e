package reliability

import (
	"fmt"
	"testing"

	"github.com/evjournal/containerd/bench/internal/harness"
)

// fixtureTB lets the suite use the test fixtures that take a testing.TB
// (the hostile registry and its images): Cleanup runs at the
// environment's close, Fatal ends the fixture call with an error
// (withFixtures). Only what those fixtures call is provided; the embedded
// testing.TB is nil, so anything else would panic, and is a bug here.
type fixtureTB struct {
	testing.TB
	env *harness.Env
}

// fixtureFailure is a fixture's Fatal, carried to withFixtures.
type fixtureFailure string

func (f fixtureTB) Helper()             {}
func (f fixtureTB) Name() string        { return "reliability" }
func (f fixtureTB) Cleanup(fn func())   { f.env.Defer(fn) }
func (f fixtureTB) Logf(string, ...any) {}
func (f fixtureTB) Fatal(args ...any)   { panic(fixtureFailure(fmt.Sprint(args...))) }
func (f fixtureTB) Fatalf(format string, args ...any) {
	panic(fixtureFailure(fmt.Sprintf(format, args...)))
}
func (f fixtureTB) Errorf(format string, args ...any) {
	panic(fixtureFailure(fmt.Sprintf(format, args...)))
}

// withFixtures runs build with a fixtureTB; a fixture's Fatal is its error.
func withFixtures(env *harness.Env, build func(testing.TB)) (err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(fixtureFailure)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("fixture: %s", f)
		}
	}()
	build(fixtureTB{env: env})
	return nil
}
