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
	if !e.running() || e.c == nil || e.init == nil {
		done(0, errNotRunning(r.ID))
		return
	}
	if _, taken := e.process(r.Pid); taken || e.reserved[r.Pid] > 0 || r.Pid == "init" {
		err := fmt.Errorf("mkdir %s: file exists", filepath.Join(s.cfg.StateDir, r.ID, r.Pid))
		done(0, errmark.Mark(err, errdefs.ErrAlreadyExists))
		return
	}
	if r.InheritInit {
		spec := e.init.Spec()
		spec.Args, spec.Terminal = r.Spec.Args, r.Spec.Terminal
		r.Spec = spec
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
	// An exec start runs beside the other exec starts and the serial work
	// of the container; it is ordered only against the steps of its life
	// that conflict (barrierStep: create, delete, checkpoint, pause,
	// resume). The delete after the init's exit, a barrier, so waits for
	// every exec start under way.
	s.enqueue(r.ID, step{
		name: "exec", kind: execStep,
		work: func(context.Context) error {
			var err error
			p, err = e.c.Exec(ctx, r.Pid, r.Spec, r.Stdio, runtime.ExecOpts{Ephemeral: r.Ephemeral, DirectOutput: r.DirectOutput})
			return err
		},
		apply: func(err error) {
			s.m.execTime.UpdateSince(start)
			if err == nil && e.initPublished {
				s.dropLateExec(e, r.Pid, p, done)
				return
			}
			if r.Ephemeral && err == nil {
				s.finishEphemeralExec(e, r.Pid, p, done)
				return
			}
			s.finishExec(e, r.Pid, p, err, done)
		},
	})
}

// dropLateExec undoes an exec that started (the container's pids are the
// host's, or runc won a race with the init's exit) after its container's
// exit was published: the exit of the container comes last, so the exec
// is killed unseen and its caller told the container stopped. Its dir goes
// with the retired container dir, whose delete waited for this start.
func (s *Supervisor) dropLateExec(e *entry, pid string, p Process, done func(int, error)) {
	delete(e.reserved, pid) // (unreachable while the init's exit waits for exec starts; kept as a guard)
	p.Signal(syscall.SIGKILL)
	p.Close()
	done(0, fmt.Errorf("container %q exited while exec %q started: %w", e.id, pid, errdefs.ErrFailedPrecondition))
}

// adoptExec makes p one of e's execs. One that started while the init
// was exiting is killed at once: the init's exit, published after every
// exec's, waits for its exit (applyExit).
func (s *Supervisor) adoptExec(e *entry, pid string, p Process) {
	delete(e.reserved, pid)
	e.execs[pid] = p
	s.procs[p] = e
	if e.initExit != nil {
		p.Signal(syscall.SIGKILL)
	}
}

// finishEphemeralExec adopts an ephemeral exec: monitored like any other,
// nothing journaled, the reply at once.
func (s *Supervisor) finishEphemeralExec(e *entry, pid string, p Process, done func(int, error)) {
	s.adoptExec(e, pid, p)
	e.ephemeral[pid] = true
	if err := s.mon.Monitor(p); err != nil {
		s.log.WithError(err).WithField("container", e.id).Error("cannot monitor exec; reconcile will find its exit")
	}
	done(p.SystemPid(), nil)
}

func (s *Supervisor) finishExec(e *entry, pid string, p Process, err error, done func(int, error)) {
	if err != nil {
		delete(e.reserved, pid)
		if e.initExit != nil && e.execsDone() {
			s.finishInit(e) // the init's exit waited for this start
		}
		done(0, err)
		return
	}
	s.adoptExec(e, pid, p)
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
