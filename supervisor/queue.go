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
	kind  stepKind
	retry bool
	work  func(ctx context.Context) error
	apply func(err error)
	// giveUp, when set, bounds the retries: after maxAttempts failures it
	// runs once instead of work (its error is logged and the queue moves
	// on), so a cleanup that can never succeed does not block the id.
	giveUp      func(ctx context.Context, cause error) error
	maxAttempts int
}

// stepKind says what a step is ordered against in its id's queue.
type stepKind int

const (
	// serialStep: one at a time, in order, with the other serial and
	// barrier steps of the id (marks, removals of exec dirs, resource
	// updates). Exec starts run beside it.
	serialStep stepKind = iota
	// barrierStep: a serial step that also waits for every exec start
	// begun before it, and that every exec start asked for after it waits
	// for: the steps of a container's life that conflict with an exec
	// (create, delete, checkpoint, pause, resume, a retire at restore).
	barrierStep
	// execStep: an exec start. Exec starts of one id run at once, beside
	// its serial steps, on the exec lane; only barriers order them. Never
	// retried.
	execStep
)

// workQueue orders the steps of one container id, across incarnations: a
// new container with the id of one being deleted waits for that delete.
// Owned by the loop.
type workQueue struct {
	id       string
	steps    []step // serial and barrier steps, and exec starts waiting behind a barrier
	running  bool   // steps[0] runs (a serial or barrier step)
	attempt  int
	barriers int // barrier steps in steps
	execs    int // exec starts running
}

// enqueue appends st to the queue of id and starts it if it may run now.
// An exec start runs at once unless a barrier step is queued before it.
func (s *Supervisor) enqueue(id string, st step) {
	q := s.queues[id]
	if q == nil {
		q = &workQueue{id: id}
		s.queues[id] = q
	}
	s.pending++
	if st.kind == execStep && q.barriers == 0 {
		s.runExecStep(q, st)
		return
	}
	if st.kind == barrierStep {
		q.barriers++
	}
	q.steps = append(q.steps, st)
	if !q.running {
		s.runHead(q)
	}
}

// runHead starts the exec starts at the head of q, then its first serial
// or barrier step (a barrier once no exec start runs).
func (s *Supervisor) runHead(q *workQueue) {
	if s.crash.frozen() {
		return
	}
	for len(q.steps) > 0 && q.steps[0].kind == execStep {
		st := q.steps[0]
		q.steps[0] = step{}
		q.steps = q.steps[1:]
		s.runExecStep(q, st)
	}
	if len(q.steps) == 0 {
		q.running = false
		if q.execs == 0 {
			delete(s.queues, q.id)
		}
		return
	}
	st := q.steps[0]
	if st.kind == barrierStep && q.execs > 0 {
		q.running = false // execDone runs the head once the last exec start ended
		return
	}
	q.running = true
	s.workers.submit(func() {
		err := st.work(context.Background())
		s.send(func(s *Supervisor) { s.stepDone(q, st, err) })
	})
}

// runExecStep runs an exec start on the exec lane, beside the other steps.
func (s *Supervisor) runExecStep(q *workQueue, st step) {
	if s.crash.frozen() {
		return
	}
	q.execs++
	s.execLane.submit(func() {
		err := st.work(context.Background())
		s.send(func(s *Supervisor) { s.execDone(q, st, err) })
	})
}

func (s *Supervisor) execDone(q *workQueue, st step, err error) {
	q.execs--
	s.pending--
	if st.apply != nil {
		st.apply(err)
	}
	if q.execs == 0 && !q.running {
		s.runHead(q) // a barrier waiting for the exec starts, or the queue's end
	}
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
	if st.kind == barrierStep {
		q.barriers--
	}
	s.pending--
	if st.apply != nil {
		st.apply(err) // still running: what apply enqueues waits for runHead
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
	q.steps[0] = step{name: st.name + " (giving up)", kind: st.kind, apply: st.apply, work: func(ctx context.Context) error {
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
