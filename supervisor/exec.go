package supervisor

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/internal/errmark"
	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/supervisor/journal"
)

// Exec starts a process in a running container and returns its host pid.
// start-process is journaled and published before the reply.
func (s *Supervisor) Exec(ctx context.Context, r ExecRequest) (int, error) {
	if err := runtime.ValidateID(r.Pid); err != nil {
		return 0, fmt.Errorf("process id: %w", err)
	}
	if err := runtime.ValidateStdio(r.Stdio); err != nil {
		return 0, err
	}
	return call(ctx, s, "exec", func(done func(int, error)) { s.startExec(ctx, r, done) })
}

func (s *Supervisor) startExec(ctx context.Context, r ExecRequest, done func(int, error)) {
	if err := s.refuseIfDegraded(); err != nil && !r.Ephemeral {
		done(0, err)
		return
	}
	e, ok := s.containers[r.ID]
	if !ok {
		done(0, ErrContainerNotFound)
		return
	}
	if !e.running() || e.c == nil {
		done(0, errNotRunning(r.ID))
		return
	}
	if _, taken := e.process(r.Pid); taken || e.reserved[r.Pid] > 0 || r.Pid == "init" {
		err := fmt.Errorf("mkdir %s: file exists", filepath.Join(s.cfg.StateDir, r.ID, r.Pid))
		done(0, errmark.Mark(err, errdefs.ErrAlreadyExists))
		return
	}
	w := stateWeight(r.Spec)
	if err := e.execRoom(w); err != nil {
		done(0, err)
		return
	}
	if err := s.admit("exec"); err != nil {
		done(0, err)
		return
	}
	e.reserved[r.Pid] = w
	var p Process
	start := time.Now()
	s.enqueue(r.ID, step{
		name: "exec",
		work: func(context.Context) error {
			var err error
			p, err = e.c.Exec(ctx, r.Pid, r.Spec, r.Stdio)
			return err
		},
		apply: func(err error) {
			s.m.execTime.UpdateSince(start)
			if r.Ephemeral && err == nil {
				s.finishEphemeralExec(e, r.Pid, p, done)
				return
			}
			s.finishExec(e, r.Pid, p, err, done)
		},
	})
}

// finishEphemeralExec adopts an ephemeral exec: monitored like any other,
// nothing journaled, the reply at once.
func (s *Supervisor) finishEphemeralExec(e *entry, pid string, p Process, done func(int, error)) {
	delete(e.reserved, pid)
	e.execs[pid] = p
	e.ephemeral[pid] = true
	s.procs[p] = e
	if err := s.mon.Monitor(p); err != nil {
		s.log.WithError(err).WithField("container", e.id).Error("cannot monitor exec; reconcile will find its exit")
	}
	done(p.SystemPid(), nil)
}

func (s *Supervisor) finishExec(e *entry, pid string, p Process, err error, done func(int, error)) {
	delete(e.reserved, pid)
	if err != nil {
		done(0, err)
		return
	}
	e.execs[pid] = p
	s.procs[p] = e
	s.emit(s.event(journal.TypeStartProcess, e, pid, 0))
	if err := s.mon.Monitor(p); err != nil {
		s.log.WithError(err).WithField("container", e.id).Error("cannot monitor exec; reconcile will find its exit")
	}
	syspid := p.SystemPid()
	s.replyAfterCommit(func() { done(syspid, nil) }, func(err error) {
		p.Signal(syscall.SIGKILL) // the client is told the exec failed: make it so
		done(0, fmt.Errorf("process %q of container %q started but its start-process event cannot be journaled, so it is killed: %w", pid, e.id, err))
	})
	s.afterCommit(func() {
		s.enqueue(e.id, step{name: "mark-exec-started", retry: true, work: func(context.Context) error { return e.c.Records().MarkStarted(pid) }})
	})
}
