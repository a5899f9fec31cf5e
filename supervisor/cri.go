package supervisor

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/supervisor/journal"
	"github.com/evjournal/containerd/supervisor/objects"
)

// The CRI service's pods and containers are loop state like every
// container (docs/design.md, "Pods under the loop"). The loop owns their
// lifecycle in s.objects and changes it in one place: every event it emits
// is applied to the table as it is journaled (applyToObjects), the same
// function a restart replays the journal through, so the live state and the
// replayed one cannot differ. The CRI service asks the loop for copies; it
// keeps only what never changes after creation.

// ObjectSpec names a new CRI object: its kind, id, pod (for a container)
// and the name it reserves.
type ObjectSpec struct {
	Kind      objects.Kind
	ID        string
	SandboxID string
	Name      string
}

// ReserveObject takes spec's name for a new object that stays invisible
// until CommitObject; AlreadyExists names the holder of a taken name.
// Nothing is journaled: a crash forgets a reservation.
func (s *Supervisor) ReserveObject(ctx context.Context, spec ObjectSpec) error {
	_, err := call(ctx, s, "reserve-object", func(done func(struct{}, error)) {
		done(struct{}{}, s.objects.Reserve(spec.Kind, spec.ID, spec.SandboxID, spec.Name))
	})
	return err
}

// ReleaseObject forgets a reservation that was never committed.
func (s *Supervisor) ReleaseObject(ctx context.Context, id string) error {
	_, err := call(ctx, s, "release-object", func(done func(struct{}, error)) {
		s.objects.Release(id)
		done(struct{}{}, nil)
	})
	return err
}

// CommitObject makes a reserved object visible: its cri-created event is
// journaled before the reply. Refused while the journal cannot write.
func (s *Supervisor) CommitObject(ctx context.Context, id string) (objects.Object, error) {
	return call(ctx, s, "commit-object", func(done func(objects.Object, error)) {
		if err := s.refuseIfDegraded(); err != nil {
			done(objects.Object{}, err)
			return
		}
		o, ok := s.objects.Get(id)
		if !ok || o.State != objects.Reserved {
			done(objects.Object{}, fmt.Errorf("object %s is not reserved: %w", id, errdefs.ErrFailedPrecondition))
			return
		}
		s.emit(objects.CreatedEvent(o))
		s.replyAfterCommit(func() {
			o, _ := s.objects.Get(id)
			done(o, nil)
		}, func(err error) {
			// Refused: make it so. The object goes, and its cri-deleted
			// follows its cri-created into the journal (both held), so
			// that neither this daemon nor the next shows it.
			s.emit(journal.Event{Type: journal.TypeCRIDeleted, ID: id})
			done(objects.Object{}, fmt.Errorf("the cri-created event of %s cannot be journaled yet: %w", id, err))
		})
	})
}

// StartObject runs a created object's process as the supervisor's
// container r.ID. The start is not cut short when the caller gives up (its
// context ends): it runs to its end, and a process it started for a caller
// that is gone is killed (its exit makes the object exited), so that the
// caller's retry or its relist finds what it was told, never a process
// nobody knows of. A second start, or one of an object being removed, is
// FailedPrecondition.
func (s *Supervisor) StartObject(ctx context.Context, r CreateRequest) (objects.Object, error) {
	if err := s.validateCreate(r); err != nil {
		return objects.Object{}, err
	}
	work := context.WithoutCancel(ctx)
	return call(ctx, s, "start-object", func(done func(objects.Object, error)) {
		if err := s.objects.BeginStart(r.ID); err != nil {
			done(objects.Object{}, err)
			return
		}
		s.startCreate(work, r, func(_ ContainerInfo, err error) {
			// A start refused before it ran anything (degraded, admission)
			// leaves the object created for a retry.
			s.objects.AbortStart(r.ID)
			if err == nil && ctx.Err() != nil {
				s.killAbandonedStart(r.ID, ctx.Err())
				err = fmt.Errorf("%s %s: the caller gave up during the start (%w); its process is killed", r.ID, "start", ctx.Err())
			}
			o, _ := s.objects.Get(r.ID)
			done(s.objectView(o), err)
		})
	})
}

// killAbandonedStart kills the init of a container whose start's caller
// went away; its exit is applied like any other.
func (s *Supervisor) killAbandonedStart(id string, why error) {
	_, p, err := s.lookup(id, "init")
	if err == nil {
		err = p.Signal(syscall.SIGKILL)
	}
	s.log.WithError(err).WithField("container", id).WithField("cause", why).
		Warn("start: its caller gave up; the process it started is killed")
}

// Object is a copy of one visible object.
func (s *Supervisor) Object(ctx context.Context, id string) (objects.Object, error) {
	return call(ctx, s, "object", func(done func(objects.Object, error)) {
		o, ok := s.objects.Get(id)
		if !ok || !o.Visible() {
			done(objects.Object{}, fmt.Errorf("object %s: %w", id, errdefs.ErrNotFound))
			return
		}
		done(s.objectView(o), nil)
	})
}

// Objects lists copies of every visible object, oldest first.
func (s *Supervisor) Objects(ctx context.Context) ([]objects.Object, error) {
	return call(ctx, s, "objects", func(done func([]objects.Object, error)) {
		l := s.objects.List()
		for i := range l {
			l[i] = s.objectView(l[i])
		}
		done(l, nil)
	})
}

// objectView fills in what the loop knows beside the table: the host pid
// of a running object's init.
func (s *Supervisor) objectView(o objects.Object) objects.Object {
	if o.State != objects.Running {
		return o
	}
	if e, ok := s.containers[o.ID]; ok && e.init != nil && e.initExit == nil {
		o.Pid = e.init.SystemPid()
	}
	return o
}

// BeginRemoveObject marks an object as being removed (starts are refused
// from now on) and returns it. A running object is FailedPrecondition.
func (s *Supervisor) BeginRemoveObject(ctx context.Context, id string) (objects.Object, error) {
	return call(ctx, s, "begin-remove-object", func(done func(objects.Object, error)) {
		done(s.objects.BeginRemove(id))
	})
}

// AbortRemoveObject ends a removal that failed: the object stays visible,
// with why, for the caller's retry.
func (s *Supervisor) AbortRemoveObject(ctx context.Context, id, why string) error {
	_, err := call(ctx, s, "abort-remove-object", func(done func(struct{}, error)) {
		s.objects.AbortRemove(id, why)
		done(struct{}{}, nil)
	})
	return err
}

// RemoveObject forgets an object and frees its name: cri-deleted is
// journaled, and the reply comes once the runtime's delete of the object's
// container has run. A removal frees disk, so it is never refused for a
// journal that cannot write: its event is then held, journaled in order once
// the journal writes again, and the reply does not wait for it.
func (s *Supervisor) RemoveObject(ctx context.Context, id string) error {
	_, err := call(ctx, s, "remove-object", func(done func(struct{}, error)) {
		o, ok := s.objects.Get(id)
		if !ok {
			done(struct{}{}, nil)
			return
		}
		if !o.Visible() {
			s.objects.Release(id)
			done(struct{}{}, nil)
			return
		}
		s.emit(journal.Event{Type: journal.TypeCRIDeleted, ID: id})
		// The reply waits, in the id's work queue, for the runtime's delete
		// of its container (runc delete: its cgroup, its runc state), so
		// that a removed pod or container has left nothing when the call
		// returns. While the journal cannot write, that delete waits for it
		// too: the reply does not.
		barrier := func() {
			s.enqueue(id, step{name: "removed", kind: barrierStep, work: func(context.Context) error { return nil },
				apply: func(error) { done(struct{}{}, nil) }})
		}
		if s.degraded != nil {
			barrier()
			return
		}
		s.replyAfterCommit(barrier, func(error) { barrier() })
	})
	return err
}

// ImportObjects adds objects that an older daemon kept in the CRI
// service's own records; ids already known are left alone. A running one
// whose container the supervisor does not have is given its exit (255).
func (s *Supervisor) ImportObjects(ctx context.Context, objs []objects.Object) (int, error) {
	return call(ctx, s, "import-objects", func(done func(int, error)) {
		n := s.objects.Import(objs)
		s.exitLostObjects("its process is gone (found at the upgrade of its records)")
		done(n, nil)
	})
}

// applyToObjects is the one place the loop changes the objects: every event
// it emits, journaled or held, is applied as it is emitted (a held exit
// shows in the CRI's status while the journal cannot write; its event is
// published once journaled).
func (s *Supervisor) applyToObjects(ev journal.Event) {
	if ev.Timestamp.IsZero() {
		ev.Timestamp = s.clock.Now()
	}
	s.objects.Apply(ev)
}

// exitLostObjects gives every running object that the supervisor has no
// container for an exit of 255: its process is gone and its exit was
// never journaled (a reboot, a lost state dir). A container the restore
// found retired is not lost: the daemon died between its retire and the
// journaling of its exit (which a stop had seen already), and the restore
// replays that exit with its real status.
func (s *Supervisor) exitLostObjects(why string) {
	retired := map[string]string{} // id -> incarnation, of the containers finished from .retired
	for _, e := range s.procs {
		if e.removed && e.c != nil {
			retired[e.id] = e.c.Incarnation()
		}
	}
	for _, o := range s.objects.List() {
		if o.State != objects.Running {
			continue
		}
		if _, ok := s.containers[o.ID]; ok {
			continue
		}
		if inc, ok := retired[o.ID]; ok && inc == o.Incarnation {
			continue
		}
		s.log.WithField("container", o.ID).WithField("kind", o.Kind).Warn("cri: " + why + "; its exit is unknown: 255")
		s.emit(journal.Event{Type: journal.TypeExit, ID: o.ID, Pid: "init", Status: 255, Incarnation: o.Incarnation})
	}
}

// ExitStatus is a process's exit as WatchExit reports it.
type ExitStatus struct {
	Status uint32
	At     time.Time
}

// WatchExit registers for the exit of process pid of container id, before
// acting on it (a signal, an exec); stop unregisters (a no-op once the exit
// was delivered). For the init of an object that is not running (any
// more), the exit it recorded is delivered at once.
func (s *Supervisor) WatchExit(ctx context.Context, id, pid string) (exits <-chan ExitStatus, stop func(), err error) {
	ch := make(chan ExitStatus, 1)
	key := id + "\x00" + pid
	_, err = call(ctx, s, "watch-exit", func(done func(struct{}, error)) {
		if o, ok := s.objects.Get(id); ok && pid == "init" && o.State == objects.Exited {
			ch <- ExitStatus{Status: uint32(o.ExitCode), At: time.Unix(0, o.FinishedAt)}
		} else {
			s.watches[key] = append(s.watches[key], ch)
		}
		done(struct{}{}, nil)
	})
	if err != nil {
		return nil, nil, err
	}
	return ch, func() { s.send(func(s *Supervisor) { s.unwatch(key, ch) }) }, nil
}

func (s *Supervisor) unwatch(key string, ch chan ExitStatus) {
	l := s.watches[key]
	for i, c := range l {
		if c == ch {
			l = append(l[:i], l[i+1:]...)
			break
		}
	}
	if len(l) == 0 {
		delete(s.watches, key)
	} else {
		s.watches[key] = l
	}
}

// fireWatches delivers an exit to its watches.
func (s *Supervisor) fireWatches(id, pid string, status uint32, at time.Time) {
	key := id + "\x00" + pid
	for _, ch := range s.watches[key] {
		ch <- ExitStatus{Status: status, At: at}
	}
	delete(s.watches, key)
}
