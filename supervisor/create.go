package supervisor

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/internal/crashpoint"
	"github.com/evjournal/containerd/internal/errmark"
	"github.com/evjournal/containerd/monitor"
	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/supervisor/journal"
	"github.com/evjournal/containerd/supervisor/objects"
	"github.com/sirupsen/logrus"
)

// CreateContainer creates and starts a container. Its start-container event
// is journaled and published before the reply, and comes before any other
// event of this incarnation. A failed start publishes nothing and leaves the
// id free when the error is returned.
func (s *Supervisor) CreateContainer(ctx context.Context, r CreateRequest) (ContainerInfo, error) {
	if err := s.validateCreate(r); err != nil {
		return ContainerInfo{}, err
	}
	return call(ctx, s, "create", func(done func(ContainerInfo, error)) {
		s.startCreate(ctx, r, func(info ContainerInfo, err error) {
			if err != nil {
				s.logRejected(r, err)
			}
			done(info, err)
		})
	})
}

// validateCreate checks a create's id and stdio paths before anything is
// made from them.
func (s *Supervisor) validateCreate(r CreateRequest) error {
	err := runtime.ValidateID(r.ID)
	if err == nil {
		err = runtime.ValidateStdio(r.Stdio)
	}
	if err != nil {
		s.logRejected(r, err)
	}
	return err
}

// logRejected says at info level why a create failed: the client gets the
// error, but an operator looking at the daemon's log must see it too (a
// client of the 0.2 era may show nothing).
func (s *Supervisor) logRejected(r CreateRequest, err error) {
	s.log.WithFields(logrus.Fields{"container": r.ID, "bundle": r.Bundle}).WithError(err).Info("create rejected")
}

// startCreate reserves the id in the loop, then runs the slow part on a
// worker, behind any pending work (a delete) of an old incarnation.
func (s *Supervisor) startCreate(ctx context.Context, r CreateRequest, done func(ContainerInfo, error)) {
	if err := s.refuseIfDegraded(); err != nil {
		done(ContainerInfo{}, err)
		return
	}
	if _, ok := s.containers[r.ID]; ok {
		err := fmt.Errorf("mkdir %s: file exists", filepath.Join(s.cfg.StateDir, r.ID))
		done(ContainerInfo{}, errmark.Mark(err, errdefs.ErrAlreadyExists))
		return
	}
	if err := s.admit("create"); err != nil {
		done(ContainerInfo{}, err)
		return
	}
	e := newEntry(r.ID)
	s.containers[r.ID] = e
	var c Container
	var p Process
	start := time.Now()
	s.enqueue(r.ID, step{
		name: "create", kind: barrierStep,
		work: func(context.Context) error {
			var err error
			c, p, err = s.createWork(ctx, r)
			return err
		},
		apply: func(err error) {
			s.m.startTime.UpdateSince(start)
			var leftover *cleanupError
			if errors.As(err, &leftover) {
				// Keep retrying the cleanup in the id's queue, so a new
				// create of the id waits for it instead of failing.
				s.enqueue(r.ID, s.cleanupStep("cleanup-failed-create", leftover.c))
				err = leftover.cause
			}
			s.finishCreate(e, c, p, err, done)
		},
	})
}

// createWork runs on a worker: state dir, then the shim runs runc create and
// runc start (one hand-off less than the daemon running the start), then the
// OOM watch, counting from the counter the shim read before the start so an
// early OOM is not missed. On failure it removes everything it made before
// returning.
func (s *Supervisor) createWork(ctx context.Context, r CreateRequest) (Container, Process, error) {
	c, err := s.rt.New(s.containerOpts(r))
	if err != nil {
		return nil, nil, err
	}
	opts := runtime.CreateOpts{Stdio: r.Stdio, Start: r.Checkpoint == ""}
	if r.Checkpoint != "" {
		dir := r.CheckpointDir
		if dir == "" {
			dir = filepath.Join(r.Bundle, "checkpoints")
		}
		opts.Checkpoint = filepath.Join(dir, r.Checkpoint)
	}
	p, err := c.Create(ctx, opts)
	if err != nil {
		return nil, nil, s.cleanupFailed(c, nil, err)
	}
	s.watchOOM(c)
	crashpoint.At("loop-start:after-runc-start")
	return c, p, nil
}

func (s *Supervisor) containerOpts(r CreateRequest) runtime.ContainerOpts {
	o := runtime.ContainerOpts{
		Root: s.cfg.StateDir, ID: r.ID, Bundle: r.Bundle, Labels: r.Labels, NoPivotRoot: r.NoPivotRoot,
		Runtime: s.cfg.Runtime, RuntimeArgs: s.cfg.RuntimeArgs, Shim: s.cfg.Shim, StartTimeout: s.cfg.StartTimeout,
	}
	if r.Runtime != "" {
		// v0.2 rule: a runtime named in the request brings its own args.
		o.Runtime, o.RuntimeArgs = r.Runtime, r.RuntimeArgs
	}
	return o
}

func (s *Supervisor) watchOOM(c Container) {
	v1, v2 := c.OOMCgroups()
	if v1 == "" && v2 == "" {
		// Also the case when init died in the meantime: nothing to watch.
		s.log.WithField("container", c.ID()).Debug("no memory cgroup found: OOM events will not be reported")
		return
	}
	src := monitor.OOMSource{ID: c.ID(), V1Dir: v1, V2Dir: v2}
	if n, ok := c.OOMBaseline(v1 + v2); ok { // one of them is set (MonitorOOM refuses both)
		src.Baseline = &n
	}
	if err := s.mon.MonitorOOM(src); err != nil {
		s.log.WithError(err).WithField("container", c.ID()).Warn("cannot watch for OOM kills")
	}
}

// cleanupFailed undoes a create that failed (cause) after the state dir was
// made. It returns cause, or a *cleanupError when something is left over.
func (s *Supervisor) cleanupFailed(c Container, p Process, cause error) error {
	s.mon.StopOOM(c.ID())
	if p != nil {
		p.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Delete(ctx); err != nil {
		s.log.WithError(err).WithField("container", c.ID()).Warn("cleanup of a failed start failed; retrying with backoff")
		return &cleanupError{cause: cause, c: c}
	}
	return cause
}

// cleanupAttempts bounds the retries of the cleanup of a create that never
// started (~7 s of backoff): a runtime that fails every call (/bin/false)
// must not hold the id for ever.
const cleanupAttempts = 3

// cleanupStep deletes a container whose start failed or was interrupted,
// retried with backoff; when the runtime keeps failing, it gives up with a
// logged reason and removes the daemon's own state, freeing the id.
func (s *Supervisor) cleanupStep(name string, c Container) step {
	return step{name: name, kind: barrierStep, retry: true, work: c.Delete, maxAttempts: cleanupAttempts,
		giveUp: func(_ context.Context, cause error) error {
			s.log.WithError(cause).WithFields(map[string]interface{}{"container": c.ID(), "runtime": c.Runtime()}).
				Error("the runtime cannot delete a container that never started; removing the daemon's own state of it " +
					"(its processes are killed); whatever the runtime keeps of the id is left")
			return c.Discard()
		}}
}

// cleanupError is a failed create whose state could not be removed yet.
type cleanupError struct {
	cause error
	c     Container
}

func (e *cleanupError) Error() string { return e.cause.Error() }
func (e *cleanupError) Unwrap() error { return e.cause }

func (s *Supervisor) finishCreate(e *entry, c Container, p Process, err error, done func(ContainerInfo, error)) {
	if err != nil {
		delete(s.containers, e.id)
		if o, ok := s.objects.Get(e.id); ok && o.Starting {
			s.emit(objects.StartFailedEvent(e.id, err.Error()))
		}
		done(ContainerInfo{}, err)
		return
	}
	e.c, e.init, e.status = c, p, StatusRunning
	s.procs[p] = e
	s.m.containers.Update(int64(len(s.containers)))
	s.emit(s.event(journal.TypeStartContainer, e, "", 0))
	if e.pendingOOM {
		e.pendingOOM = false
		s.emit(s.event(journal.TypeOOM, e, "", 0))
	}
	if err := s.mon.Monitor(p); err != nil {
		s.log.WithError(err).WithField("container", e.id).Error("cannot monitor init; reconcile will find its exit")
	}
	info := e.info()
	s.replyAfterCommit(func() { crashpoint.At("loop-start:after-journal"); done(info, nil) }, func(err error) {
		// The client is told the create failed: make it so. The exit
		// and the start-container are journaled once the journal can.
		p.Signal(syscall.SIGKILL)
		done(ContainerInfo{}, fmt.Errorf("container %q started but its start-container event cannot be journaled, so it is killed: %w", e.id, err))
	})
	s.afterCommit(func() {
		s.enqueue(e.id, step{name: "mark-started", retry: true, work: func(context.Context) error { return c.Records().MarkStarted("init") }})
	})
}

// errNotRunning wraps the not-running error with the container id.
func errNotRunning(id string) error {
	return fmt.Errorf("container %q: %w", id, ErrContainerNotRunning)
}
