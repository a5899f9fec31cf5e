package supervisor

import (
	"context"
	"hash/fnv"
	"syscall"
	"time"

	"github.com/evjournal/containerd/monitor"
	"github.com/evjournal/containerd/supervisor/journal"
)

// exitWorkers is the size of the exit lane: the workers that do nothing but
// read exit statuses and retire state dirs, so an exit never waits behind
// creates hung in the runtime, checkpoints or readers (docs/design.md).
// Each has its own queue and takes the containers whose id hashes to it, so
// the exits of one container are handled in the order they were reported.
const exitWorkers = 2

// exitLane is the exit lane: one single-worker pool per shard.
type exitLane []*workerPool

func newExitLane() exitLane {
	l := make(exitLane, exitWorkers)
	for i := range l {
		l[i] = newWorkerPool(1)
	}
	return l
}

// submit queues j on the shard of container id.
func (l exitLane) submit(id string, j job) {
	h := fnv.New32a()
	h.Write([]byte(id))
	l[h.Sum32()%uint32(len(l))].submit(j)
}

func (l exitLane) stop() {
	for _, p := range l {
		p.stop()
	}
}

// onExit handles a process whose shim reported its exit (from the monitor,
// reconcile or restore). Each process is handled once. Its status is read,
// and for an init the state dir retired (the id is free before the exit is
// published), on the exit lane, outside the id's work queue: nothing queued
// for the container can hold its exit back. A failed retire is retried with
// backoff; the exit is published once it succeeded.
func (s *Supervisor) onExit(src monitor.ExitSource) {
	p, ok := src.(Process)
	if !ok {
		return
	}
	e, ok := s.procs[p]
	if !ok || e.exiting[p] {
		return
	}
	e.exiting[p] = true
	s.runExit(e, p, time.Now(), 0)
}

// runExit is one attempt of the exit lane's work for p.
func (s *Supervisor) runExit(e *entry, p Process, start time.Time, attempt int) {
	if s.crash.frozen() {
		return
	}
	isInit := p == e.init
	s.exitLane.submit(e.id, func() {
		status, reason := p.ExitStatus()
		if reason != "" {
			s.log.WithField("container", e.id).WithField("pid", p.ID()).
				WithField("status", status).Warn("exit status not recorded by the shim: " + reason)
		}
		var err error
		if isInit {
			err = e.c.Retire()
		}
		s.sendUrgent(func(s *Supervisor) {
			if err != nil && !s.stopping {
				attempt++
				d := backoff(attempt)
				s.m.retries.Inc(1)
				s.log.WithError(err).WithFields(map[string]interface{}{
					"container": e.id, "pid": p.ID(), "attempt": attempt, "retry_in": d,
				}).Warn("exit: cannot retire the container's state dir; the exit is published once it is retired")
				s.clock.AfterFunc(d, func() { s.send(func(s *Supervisor) { s.runExit(e, p, start, attempt) }) })
				return
			}
			s.m.exitTime.UpdateSince(start)
			s.applyExit(e, p, isInit, status, p.ExitTime())
		})
	})
}

// applyExit publishes an exec's exit at once, and an init's once every exec
// of the container has exited (and every exec start under way has ended:
// one that started is killed and its exit comes first): clients read the
// init's exit as the end of the container, so it comes last, exactly once.
func (s *Supervisor) applyExit(e *entry, p Process, isInit bool, status uint32, at time.Time) {
	if !isInit {
		s.publishExecExit(e, p, status, at)
		if e.initExit != nil && e.execsDone() {
			s.finishInit(e)
		}
		return
	}
	e.initExit = &exitNote{status: status, at: at}
	// The container is over: its memory cgroup is no longer watched. Done
	// here, while the id is still this entry's, never later when a new
	// incarnation may own the id and its watch.
	if s.containers[e.id] == e {
		s.mon.StopOOM(e.id)
	}
	if e.execsDone() {
		s.finishInit(e)
		return
	}
	s.killExecs(e, 0)
}

// killExecs SIGKILLs the execs that outlive their init. Execs die with init
// only when init is pid 1 of its own pid namespace; others (a host-pid
// container, say) are killed, as v0.2.9's shim did (runc kill --all). Their
// exits come through the monitor with their real statuses, and the init's
// follows. Nothing is published on a timer: if an exec is still there after
// ExecGrace (a process in uninterruptible sleep), it is killed again and
// the wait goes on, logged.
func (s *Supervisor) killExecs(e *entry, round int) {
	for _, x := range e.execs {
		if !e.exiting[x] {
			x.Signal(syscall.SIGKILL) // an exec already gone is fine
		}
	}
	s.clock.AfterFunc(s.cfg.ExecGrace, func() {
		s.send(func(s *Supervisor) {
			if e.initPublished || len(e.execs) == 0 {
				return
			}
			s.log.WithField("container", e.id).WithField("execs", len(e.execs)).WithField("round", round+1).
				Warn("execs still running after their init exited and were killed; killing them again, the init's exit waits for theirs")
			s.killExecs(e, round+1)
		})
	})
}

func (s *Supervisor) publishExecExit(e *entry, p Process, status uint32, at time.Time) {
	delete(e.execs, p.ID())
	delete(s.procs, p)
	if e.ephemeral[p.ID()] {
		delete(e.ephemeral, p.ID())
		// The removal is queued before the watch fires: the goroutine
		// readied last runs first when the loop waits again (Go's runnext),
		// so the waiting ExecSync replies before the dir's removal runs.
		s.enqueue(e.id, step{name: "remove-exec", retry: true, work: func(context.Context) error {
			p.Close()
			return e.c.RemoveProcess(p.ID())
		}})
		s.fireWatches(e.id, p.ID(), status, at)
		return
	}
	s.emit(s.exitEvent(e, p.ID(), status, at))
	s.fireWatches(e.id, p.ID(), status, at)
	s.afterCommit(func() {
		s.enqueue(e.id, step{name: "remove-exec", retry: true, work: func(context.Context) error {
			if err := e.c.Records().MarkExitPublished(p.ID()); err != nil {
				return err
			}
			p.Close()
			if e.c == nil {
				return nil
			}
			return e.c.RemoveProcess(p.ID())
		}})
	})
}

// finishInit publishes the init's exit, frees the id and deletes the old
// incarnation's runc state behind it. It runs once per entry.
func (s *Supervisor) finishInit(e *entry) {
	if e.initPublished {
		return
	}
	e.initPublished, e.removed = true, true
	if s.containers[e.id] == e {
		delete(s.containers, e.id)
	}
	delete(s.procs, e.init)
	s.m.containers.Update(int64(len(s.containers)))
	s.emit(s.exitEvent(e, "init", e.initExit.status, e.initExit.at))
	s.fireWatches(e.id, "init", e.initExit.status, e.initExit.at)
	s.afterCommit(func() { s.enqueue(e.id, s.deleteStep(e)) })
}

// exitEvent is an exit event; at is when the shim reaped the process (zero
// when unknown).
func (s *Supervisor) exitEvent(e *entry, pid string, status uint32, at time.Time) journal.Event {
	ev := s.event(journal.TypeExit, e, pid, status)
	if !at.IsZero() {
		ev.ExitedAt = at.UTC()
	}
	return ev
}

// deleteStep marks the exit as published, then removes the runc state and
// the state dir, retrying with backoff until it succeeds.
func (s *Supervisor) deleteStep(e *entry) step {
	return step{name: "delete", kind: barrierStep, retry: true, work: func(ctx context.Context) error {
		start := time.Now()
		defer s.m.deleteTime.UpdateSince(start)
		if err := e.c.Records().MarkExitPublished("init"); err != nil {
			return err
		}
		e.init.Close()
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		return e.c.Delete(ctx)
	}}
}

// onOOM publishes an oom event for a live container. One seen while the
// container is still being created waits for its start-container.
func (s *Supervisor) onOOM(id string) {
	e, ok := s.containers[id]
	if !ok {
		return
	}
	if e.status == statusCreating {
		e.pendingOOM = true
		return
	}
	s.emit(s.event(journal.TypeOOM, e, "", 0))
}
