package supervisor

import (
	"context"
	"fmt"
	"time"

	"github.com/containerd/errdefs"
)

// Backoff bounds for work that failed and is retried (an exit whose
// cleanup failed, say): 1 s doubling to 5 min.
const (
	minBackoff = time.Second
	maxBackoff = 5 * time.Minute
)

// step is one unit of per-container work. work runs on a worker; apply runs
// on the loop with work's error. A step with retry set is re-run with
// backoff until work succeeds, and the steps behind it wait, in order.
type step struct {
	name  string
	retry bool
	work  func(ctx context.Context) error
	apply func(err error)
	// giveUp, when set, bounds the retries: after maxAttempts failures it
	// runs once instead of work (its error is logged and the queue moves
	// on), so a cleanup that can never succeed does not block the id.
	giveUp      func(ctx context.Context, cause error) error
	maxAttempts int
}

// workQueue serialises the steps of one container id, across incarnations:
// a new container with the id of one being deleted waits for that delete.
// Owned by the loop.
type workQueue struct {
	id      string
	steps   []step
	running bool
	attempt int
}

// enqueue appends st to the queue of id and starts it if the queue is idle.
func (s *Supervisor) enqueue(id string, st step) {
	q := s.queues[id]
	if q == nil {
		q = &workQueue{id: id}
		s.queues[id] = q
	}
	q.steps = append(q.steps, st)
	s.pending++
	if !q.running {
		s.runHead(q)
	}
}

func (s *Supervisor) runHead(q *workQueue) {
	if s.crash.frozen() {
		return
	}
	if len(q.steps) == 0 {
		q.running = false
		delete(s.queues, q.id)
		return
	}
	q.running = true
	st := q.steps[0]
	s.workers.submit(func() {
		err := st.work(context.Background())
		s.send(func(s *Supervisor) { s.stepDone(q, st, err) })
	})
}

func (s *Supervisor) stepDone(q *workQueue, st step, err error) {
	if err != nil && st.retry && !s.stopping && st.giveUp != nil && q.attempt+1 >= st.maxAttempts {
		s.runGiveUp(q, st, err)
		return
	}
	if err != nil && st.retry && !s.stopping {
		q.attempt++
		d := backoff(q.attempt)
		s.m.retries.Inc(1)
		s.log.WithError(err).WithFields(map[string]interface{}{
			"container": q.id, "step": st.name, "attempt": q.attempt, "retry_in": d,
		}).Warn("container work failed; retrying with backoff, later work for this container waits")
		s.clock.AfterFunc(d, func() { s.send(func(s *Supervisor) { s.runHead(q) }) })
		return
	}
	q.attempt = 0
	q.steps[0] = step{}
	q.steps = q.steps[1:]
	s.pending--
	if st.apply != nil {
		st.apply(err)
	}
	s.runHead(q)
}

// runGiveUp replaces the head step, which failed for the last time with
// cause, by its giveUp work, run once.
func (s *Supervisor) runGiveUp(q *workQueue, st step, cause error) {
	s.log.WithError(cause).WithFields(map[string]interface{}{
		"container": q.id, "step": st.name, "attempts": q.attempt + 1,
	}).Error("container work keeps failing; giving up on it")
	q.attempt = 0
	q.steps[0] = step{name: st.name + " (giving up)", apply: st.apply, work: func(ctx context.Context) error {
		err := st.giveUp(ctx, cause)
		if err != nil {
			s.log.WithError(err).WithFields(map[string]interface{}{"container": q.id, "step": st.name}).Error("giving up failed too; left as it is")
		}
		return err
	}}
	s.runHead(q)
}

// backoff is the wait before attempt n (1-based): 1 s, 2 s, 4 s ... 5 min.
func backoff(attempt int) time.Duration {
	d := minBackoff
	for i := 1; i < attempt && d < maxBackoff; i++ {
		d *= 2
	}
	if d > maxBackoff {
		d = maxBackoff
	}
	return d
}

// maxPending bounds the steps waiting in (or running from) the per-id
// queues. A client request that would add one more is refused with
// ResourceExhausted: a flood of creates or checkpoints meets a clear error,
// not an unbounded queue. Exits never count against it: they have their
// own lane (exit.go), and the cleanup steps they add are never refused.
const maxPending = 512

// admit says whether a client request of kind may queue work now.
func (s *Supervisor) admit(kind string) error {
	if s.pending < maxPending {
		return nil
	}
	s.m.refused.Inc(1)
	return fmt.Errorf("daemon busy: %d operations (creates, execs, checkpoints, updates, deletes) already wait for the runtime; %s refused, retry later: %w",
		s.pending, kind, errdefs.ErrResourceExhausted)
}

// maxPendingReads bounds the reads (State's pid scans, Stats, checkpoint
// lists) waiting for the read lane.
const maxPendingReads = 1024

// admitRead says whether a read request of kind may queue on the read lane.
func (s *Supervisor) admitRead(kind string) error {
	if n := s.readLane.load(); n >= maxPendingReads {
		s.m.refused.Inc(1)
		return fmt.Errorf("daemon busy: %d State/Stats reads already in progress; %s refused, retry later: %w",
			n, kind, errdefs.ErrResourceExhausted)
	}
	return nil
}
