package server

import (
	"context"
	"runtime"
	"sync"
)

// The fakes of the service's seams (seams.go). Each records its calls in a
// shared log (with the state of the call's context: a cleanup must run with
// a live one) and, at named points, runs the hook a test set there: a hook
// may fail the step, hold it in flight, or crash (die here, as a daemon
// killed at that step would). Point "M" runs before method M acts, "M.after"
// once it acted: an error there is a step that failed after doing its work
// (a CNI ADD that took a lease, a reply that was lost).

// callRec is one call to a fake.
type callRec struct {
	what, id string
	hasCtx   bool  // the method takes a context
	ctxErr   error // the context's error at the call
	deadline bool  // the context had a deadline
}

// faults is the call log and the hooks, shared by every fake of a test.
type faults struct {
	mu    sync.Mutex
	hooks map[string]func(id string) error // guarded by mu
	log   []callRec                        // guarded by mu
}

func newFaults() *faults { return &faults{hooks: map[string]func(string) error{}} }

// set puts h at point (nil removes it).
func (f *faults) set(point string, h func(id string) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h == nil {
		delete(f.hooks, point)
		return
	}
	f.hooks[point] = h
}

// at runs the hook at point, if any.
func (f *faults) at(point, id string) error {
	f.mu.Lock()
	h := f.hooks[point]
	f.mu.Unlock()
	if h == nil {
		return nil
	}
	return h(id)
}

// record logs a call; ctx may be nil for methods without one.
func (f *faults) record(what, id string, ctx context.Context) {
	r := callRec{what: what, id: id, hasCtx: ctx != nil}
	if ctx != nil {
		r.ctxErr = ctx.Err()
		_, r.deadline = ctx.Deadline()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, r)
}

// calls are the logged calls of what (every call when what is "").
func (f *faults) calls(what string) []callRec {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []callRec
	for _, r := range f.log {
		if what == "" || r.what == what {
			out = append(out, r)
		}
	}
	return out
}

// Hooks.

// failWith fails every call.
func failWith(err error) func(string) error { return func(string) error { return err } }

// failOnce fails the first call only.
func failOnce(err error) func(string) error {
	var once sync.Once
	return func(string) error {
		var out error
		once.Do(func() { out = err })
		return out
	}
}

// cancelOnce is the first call's caller giving up during it: cancel ends
// its context, and the call returns that context's error (as the loop's
// call does, whatever the loop did meanwhile).
func cancelOnce(cancel context.CancelFunc) func(string) error {
	var once sync.Once
	return func(string) error {
		var err error
		once.Do(func() {
			cancel()
			err = context.Canceled
		})
		return err
	}
}

// crash ends the calling goroutine where it stands, running only its
// deferred calls (which the service's cleanups check an error for, so none
// runs): what a daemon killed at this step leaves.
func crash(string) error {
	runtime.Goexit()
	return nil
}

// gate holds the first call at its point until released; later calls pass.
type gate struct {
	once    sync.Once
	entered chan string // the id of the held call
	release chan error  // what the held call returns
}

func newGate() *gate { return &gate{entered: make(chan string, 1), release: make(chan error, 1)} }

func (g *gate) hook(id string) error {
	first := false
	g.once.Do(func() { first = true })
	if !first {
		return nil
	}
	g.entered <- id
	return <-g.release
}
