package supervisor

import (
	"context"
	"fmt"
	"syscall"

	"github.com/evjournal/containerd/supervisor/journal"
	"github.com/sirupsen/logrus"
)

// lookup finds a live container and one of its processes.
func (s *Supervisor) lookup(id, pid string) (*entry, Process, error) {
	e, ok := s.containers[id]
	if !ok || e.c == nil {
		return nil, nil, ErrContainerNotFound
	}
	p, ok := e.process(pid)
	if !ok || e.exiting[p] {
		return e, nil, ErrProcessNotFound
	}
	return e, p, nil
}

// Signal sends sig to one process of a container (not through runc). The
// runtime refuses when the pid now belongs to another process.
func (s *Supervisor) Signal(ctx context.Context, id, pid string, sig syscall.Signal) error {
	_, err := call(ctx, s, "signal", func(done func(struct{}, error)) {
		_, p, err := s.lookup(id, pid)
		if err == nil {
			err = p.Signal(sig)
		}
		done(struct{}{}, err)
	})
	return err
}

// UpdateProcess closes a process's stdin and/or resizes its pty.
func (s *Supervisor) UpdateProcess(ctx context.Context, r ProcessUpdate) error {
	_, err := call(ctx, s, "update-process", func(done func(struct{}, error)) {
		_, p, err := s.lookup(r.ID, r.Pid)
		if err == nil && (r.Width > 0 || r.Height > 0) {
			err = p.Resize(r.Width, r.Height)
		}
		if err == nil && r.CloseStdin {
			err = p.CloseStdin()
		}
		done(struct{}{}, err)
	})
	return err
}

// ReopenLog makes the shim of a process reopen its CRI log
// (runtime.Stdio.LogPath), for CRI's ReopenContainerLog: kubelet renamed the
// file to rotate it. The process is looked up in the loop, with
// UpdateProcess's errors (ErrContainerNotFound, ErrProcessNotFound); the
// shim's answer is then awaited in the caller's goroutine, never in the
// loop. A process without a log path, not running, or whose shim could not
// reopen (the old file then stays in use) is FailedPrecondition.
func (s *Supervisor) ReopenLog(ctx context.Context, id, pid string) error {
	p, err := call(ctx, s, "reopen-log", func(done func(Process, error)) {
		_, p, err := s.lookup(id, pid)
		done(p, err)
	})
	if err != nil {
		return err
	}
	return p.ReopenLog(ctx)
}

// Update pauses, resumes or changes the resources of a container. pause and
// resume events are published before the reply.
func (s *Supervisor) Update(ctx context.Context, r UpdateRequest) error {
	_, err := call(ctx, s, "update", func(done func(struct{}, error)) { s.startUpdate(ctx, r, done) })
	return err
}

func (s *Supervisor) startUpdate(ctx context.Context, r UpdateRequest, done func(struct{}, error)) {
	e, ok := s.containers[r.ID]
	if !ok || e.c == nil {
		done(struct{}{}, ErrContainerNotFound)
		return
	}
	var work func(context.Context) error
	var evType, newStatus string
	switch r.Status {
	case StatusPaused:
		work, evType, newStatus = e.c.Pause, journal.TypePause, StatusPaused
	case StatusRunning:
		work, evType, newStatus = e.c.Resume, journal.TypeResume, StatusRunning
	case "":
		if r.Resources == nil {
			done(struct{}{}, nil)
			return
		}
		work = func(ctx context.Context) error { return e.c.UpdateResources(ctx, r.Resources) }
	default:
		done(struct{}{}, ErrUnknownContainerStatus)
		return
	}
	if err := s.admit("update"); err != nil {
		done(struct{}{}, err)
		return
	}
	if evType != "" {
		if err := s.refuseIfDegraded(); err != nil {
			done(struct{}{}, err)
			return
		}
	}
	kind := serialStep // runc update: beside exec starts
	if evType != "" {
		kind = barrierStep // pause, resume: an exec must not join a cgroup being frozen
	}
	s.enqueue(r.ID, step{
		name: "update", kind: kind,
		work: func(context.Context) error { return work(ctx) },
		apply: func(err error) {
			if err != nil || evType == "" || e.removed {
				done(struct{}{}, err)
				return
			}
			e.status = newStatus
			s.emit(s.event(evType, e, "", 0))
			s.replyAfterCommit(func() { done(struct{}{}, nil) }, func(err error) {
				done(struct{}{}, fmt.Errorf("container %q is now %s but its %s event cannot be journaled yet: %w", e.id, newStatus, evType, err))
			})
		},
	})
}

// State lists one container (id) or all. Pids come from runc ps, run on a
// worker; the reply comes from there since nothing in the loop changes.
func (s *Supervisor) State(ctx context.Context, id string) ([]ContainerInfo, error) {
	return call(ctx, s, "state", func(done func([]ContainerInfo, error)) {
		var infos []ContainerInfo
		var cs []Container
		for _, e := range s.containers {
			if (id != "" && e.id != id) || e.c == nil {
				continue
			}
			info := e.info()
			infos = append(infos, info)
			if info.Status == StatusRunning || info.Status == StatusPaused {
				cs = append(cs, e.c)
			} else {
				cs = append(cs, nil)
			}
		}
		if id != "" && len(infos) == 0 {
			done(nil, ErrContainerNotFound)
			return
		}
		if err := s.admitRead("state"); err != nil {
			done(nil, err)
			return
		}
		s.readLane.submit(func() { done(fillPids(ctx, s.log, infos, cs)) })
	})
}

// fillPids adds each running container's pids. A container whose pids
// cannot be read (it exited during the call: its cgroup is gone) is
// reported as the loop saw it, without pids: one container ending never
// fails the State of all.
func fillPids(ctx context.Context, log *logrus.Entry, infos []ContainerInfo, cs []Container) ([]ContainerInfo, error) {
	for i, c := range cs {
		if c == nil {
			continue
		}
		pids, err := c.Pids(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			log.WithError(err).WithField("container", c.ID()).Debug("state: pids unreadable (the container is ending?); reported without them")
			continue
		}
		infos[i].Pids = initFirst(pids, infos[i])
	}
	return infos, nil
}

// initFirst orders pids so that the init's host pid comes first: clients
// read pids[0] as init.
func initFirst(pids []int, info ContainerInfo) []int {
	initPid := 0
	for _, p := range info.Processes {
		if p.ID == "init" {
			initPid = p.SystemPid
		}
	}
	out := make([]int, 0, len(pids))
	for _, p := range pids {
		if p == initPid {
			out = append([]int{p}, out...)
		} else {
			out = append(out, p)
		}
	}
	return out
}
