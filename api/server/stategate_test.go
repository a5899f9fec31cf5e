package server

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/supervisor"
)

// State calls beyond the gate's width wait, parked, and run one after
// another; a caller that gives up while waiting gets its deadline's error.
func TestStateGateRunsOneAtATime(t *testing.T) {
	release := make(chan struct{})
	var inside, most, entered atomic.Int64
	b := &fakeBackend{state: func(string) ([]supervisor.ContainerInfo, error) {
		entered.Add(1)
		n := inside.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		<-release
		inside.Add(-1)
		return []supervisor.ContainerInfo{{ID: "c"}}, nil
	}}
	s, c, _ := startServer(t, b)
	s.state = newStateGate(1)

	const calls = 3
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.State(context.Background(), &types.StateRequest{})
			errs <- err
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for inside.Load() != 1 || s.state.waiting.Load() != calls-1 {
		if inside.Load() > 1 {
			t.Fatalf("%d State calls inside the backend at once, want 1", inside.Load())
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: %d inside, %d waiting; want 1 and %d", inside.Load(), s.state.waiting.Load(), calls-1)
		}
		time.Sleep(time.Millisecond)
	}

	// One more, with a deadline, gives up while waiting, and its handler
	// leaves the queue (it does not hold a place for later).
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	// Either side may notice the deadline first: the client says "context
	// deadline exceeded", a server-side expiry arrives as RST_STREAM CANCEL;
	// both carry DeadlineExceeded, which is what a caller branches on.
	_, err := c.State(ctx, &types.StateRequest{})
	if st, _ := status.FromError(err); st.Code() != codes.DeadlineExceeded {
		t.Fatalf("abandoned State: got %s %q, want DeadlineExceeded", st.Code(), st.Message())
	}
	for s.state.waiting.Load() != calls-1 {
		if time.Now().After(deadline) {
			t.Fatalf("the abandoned call still waits: %d waiting, want %d", s.state.waiting.Load(), calls-1)
		}
		time.Sleep(time.Millisecond)
	}

	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("State: %v", err)
		}
	}
	if m := most.Load(); m != 1 {
		t.Errorf("at most %d State calls were inside the backend at once, want 1", m)
	}
	if n := entered.Load(); n != calls {
		t.Errorf("%d State calls reached the backend, want %d: the abandoned one must not run", n, calls)
	}
}
