package server

import (
	"context"
	goruntime "runtime"
	"sync/atomic"
)

// stateGate bounds how many State calls run at once to one less than the
// daemon's Ps (at least one). A State poll is cheap, but a hundred clients
// polling in a loop kept every P busy with their handlers, and the Go
// scheduler has no priorities: the exit path's goroutines (the monitor back
// from epoll_wait, the subscriber's stream) waited behind them for a P.
// With the gate the waiting handlers are parked, not runnable, so a P stays
// free for everything else. Measured with bench -only exit on 2 CPUs:
// exit_event_p99_under_state_load_ms 145-205 without the gate, 30-32 with
// it, while the pollers got more replies (625k in the series against
// 206k-452k), since they no longer fought each other for the CPUs. A gate
// as wide as GOMAXPROCS (tried 2026-11-25) changed nothing: it still let
// the pollers take every P.
type stateGate struct {
	places  chan struct{}
	waiting atomic.Int64 // calls waiting for a place
}

func newStateGate(width int) *stateGate {
	return &stateGate{places: make(chan struct{}, width)}
}

// stateGateWidth is the gate's width for this daemon: GOMAXPROCS - 1, at
// least 1.
func stateGateWidth() int { return max(1, goruntime.GOMAXPROCS(0)-1) }

// enter waits for a place; the returned func gives it back. A caller that
// goes away while waiting gets its context's error.
func (g *stateGate) enter(ctx context.Context) (leave func(), err error) {
	select {
	case g.places <- struct{}{}:
		return func() { <-g.places }, nil
	default:
	}
	g.waiting.Add(1)
	defer g.waiting.Add(-1)
	select {
	case g.places <- struct{}{}:
		return func() { <-g.places }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
