package supervisor

import (
	"context"
	"syscall"
	"time"

	"github.com/evjournal/containerd/monitor"
	"github.com/evjournal/containerd/supervisor/journal"
)

// onExit handles a process whose shim is gone (from the monitor, reconcile
// or restore). Each process is handled once. The status is read, and for an
// init the state dir retired, on a worker; both are retried with backoff on
// failure, and later work for the container waits behind them.
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
	isInit := p == e.init
	var status uint32
	start := time.Now()
	s.enqueue(e.id, step{
		name:  "exit",
		retry: true,
		work: func(context.Context) error {
			var reason string
			status, reason = p.ExitStatus()
			if reason != "" {
				s.log.WithField("container", e.id).WithField("pid", p.ID()).
					WithField("status", status).Warn("exit status not recorded by the shim: " + reason)
			}
			if isInit {
				// Free the id before the exit is published: clients
				// create the same id again right after it.
				return e.c.Retire()
			}
			return nil
		},
		apply: func(error) {
			s.m.exitTime.UpdateSince(start)
			s.applyExit(e, p, isInit, status)
		},
	})
}

func (s *Supervisor) applyExit(e *entry, p Process, isInit bool, status uint32) {
	if !isInit {
		s.publishExecExit(e, p, status)
		if e.initExit != nil && len(e.execs) == 0 {
			s.finishInit(e)
		}
		return
	}
	e.initExit = &status
	if len(e.execs) == 0 {
		s.finishInit(e)
		return
	}
	// Execs die with init only when init is pid 1 of its own pid
	// namespace. Otherwise kill them, as v0.2.9's shim did (runc kill
	// --all): their exits (137) then come promptly, before init's.
	for _, x := range e.execs {
		if !e.exiting[x] {
			x.Signal(syscall.SIGKILL) // an exec already gone is fine
		}
	}
	// Their exits come soon. Do not wait for ever on one that never shows
	// (v0.2.9 did).
	s.clock.AfterFunc(s.cfg.ExecGrace, func() {
		s.send(func(s *Supervisor) {
			if !e.removed {
				s.log.WithField("container", e.id).WithField("execs", len(e.execs)).
					Warn("execs still running after init exit grace period; publishing init exit first")
				s.finishInit(e)
			}
		})
	})
}

func (s *Supervisor) publishExecExit(e *entry, p Process, status uint32) {
	delete(e.execs, p.ID())
	delete(s.procs, p)
	s.emit(s.event(journal.TypeExit, e, p.ID(), status))
	s.afterCommit(func() {
		s.enqueue(e.id, step{name: "remove-exec", retry: true, work: func(context.Context) error {
			if err := p.MarkExitPublished(); err != nil {
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
// incarnation's runc state behind it.
func (s *Supervisor) finishInit(e *entry) {
	e.removed = true
	if s.containers[e.id] == e {
		delete(s.containers, e.id)
	}
	delete(s.procs, e.init)
	s.m.containers.Update(int64(len(s.containers)))
	s.mon.StopOOM(e.id)
	s.emit(s.event(journal.TypeExit, e, "init", *e.initExit))
	s.afterCommit(func() { s.enqueue(e.id, s.deleteStep(e)) })
}

// deleteStep marks the exit as published, then removes the runc state and
// the state dir, retrying with backoff until it succeeds.
func (s *Supervisor) deleteStep(e *entry) step {
	return step{name: "delete", retry: true, work: func(ctx context.Context) error {
		start := time.Now()
		defer s.m.deleteTime.UpdateSince(start)
		if err := e.init.MarkExitPublished(); err != nil {
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
