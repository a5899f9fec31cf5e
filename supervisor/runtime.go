package supervisor

import (
	"context"
	"syscall"
	"time"

	"github.com/evjournal/containerd/monitor"
	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/specs"
)

// Runtime is what the supervisor needs from package runtime. The real one is
// a thin adapter; tests use a fake that needs no runc.
type Runtime interface {
	New(opts runtime.ContainerOpts) (Container, error)
	Load(root, id string) (Container, error)
	// Recover rebuilds a container whose state.json cannot be read from
	// what survives (runtime state, process dirs, the hint).
	Recover(root, id string, hint runtime.RecoverHint) (Container, error)
	ListIDs(root string) ([]string, error)
	Retired(root string) ([]Container, error)
	SetAside(root, id, reason string) error
	// PruneAside removes the oldest set-aside dirs beyond the newest keep
	// and returns their names.
	PruneAside(root string, keep int) ([]string, error)
	// ListRunc and DeleteRunc find and remove runc state left without a
	// container record (restore cleans it up).
	ListRunc(ctx context.Context, runtime string, args []string) ([]runtime.RuncContainer, error)
	DeleteRunc(ctx context.Context, runtime string, args []string, id string) error
}

// Container is one container incarnation, as package runtime models it:
// its lifecycle; what was published about it is in Records().
type Container interface {
	ID() string
	Bundle() string
	Labels() []string
	Runtime() string
	Incarnation() string
	// Created is when the container was made (its record's time).
	Created() time.Time
	// Paused reports whether the container's cgroup is frozen now.
	Paused() bool
	// Create makes the init through a shim; with opts.Start the shim starts
	// it too (the supervisor never starts an init separately).
	Create(ctx context.Context, opts runtime.CreateOpts) (Process, error)
	Exec(ctx context.Context, pid string, spec specs.ProcessSpec, stdio runtime.Stdio, opts runtime.ExecOpts) (Process, error)
	Processes() []Process
	RemoveProcess(pid string) error
	Pause(ctx context.Context) error
	Resume(ctx context.Context) error
	Pids(ctx context.Context) ([]int, error)
	UpdateResources(ctx context.Context, r *specs.LinuxResources) error
	Stats(ctx context.Context) (*runtime.Stats, error)
	Checkpoint(ctx context.Context, dir string, o runtime.CheckpointOpts) error
	Checkpoints(dir string) ([]runtime.Checkpoint, error)
	DeleteCheckpoint(dir, name string) error
	OOMCgroups() (v1Dir, v2Dir string)
	// OOMBaseline is dir's oom_kill counter as read before the init started
	// (ok false: unknown, the watch reads it itself).
	OOMBaseline(dir string) (count uint64, ok bool)
	Retire() error
	Delete(ctx context.Context) error
	// DeleteAbandoned is Delete for a create a crash cut short, whose shim
	// may still be running runc: it deletes until the shim is gone.
	DeleteAbandoned(ctx context.Context) error
	// Discard removes the daemon's own state when Delete keeps failing
	// (the runtime's state, if any, is left).
	Discard() error
	// Records is the container's publication bookkeeping (Records).
	Records() Records
}

// Records is on-disk bookkeeping of what was published about one container
// incarnation, kept apart from the lifecycle: the marker that a process's
// start event was published (start-container for "init", start-process for
// an exec) and the marker that its exit event was, so that a restarted
// daemon publishes each once. pid is "init" or the exec id.
type Records interface {
	MarkStarted(pid string) error
	Started(pid string) bool
	MarkExitPublished(pid string) error
	ExitPublished(pid string) bool
}

// Process is one process (init or exec) of a container: its lifecycle.
// What was published about it is in its container's Records.
type Process interface {
	monitor.ExitSource
	ID() string
	SystemPid() int
	State() runtime.ProcessState
	ExitStatus() (status uint32, reason string)
	// ExitTime is when the shim reaped the process, once ExitStatus is
	// known; zero when unknown.
	ExitTime() time.Time
	Signal(sig syscall.Signal) error
	Resize(w, h uint32) error
	CloseStdin() error
	// ReopenLog makes the shim reopen the process's CRI log
	// (runtime.Stdio.LogPath) and waits for its answer.
	ReopenLog(ctx context.Context) error
	Spec() specs.ProcessSpec
	Stdio() runtime.Stdio
	Close() error
}

// Monitor is what the supervisor needs from package monitor.
type Monitor interface {
	Monitor(p monitor.ExitSource) error
	MonitorOOM(s monitor.OOMSource) error
	StopOOM(id string)
	Exits() <-chan monitor.ExitSource
	OOMs() <-chan string
	Count() int
	Close() error
}

// realRuntime adapts package runtime to the Runtime interface.
type realRuntime struct{}

func (realRuntime) New(opts runtime.ContainerOpts) (Container, error) {
	c, err := runtime.New(opts)
	if err != nil {
		return nil, err
	}
	return realContainer{c}, nil
}

func (realRuntime) Load(root, id string) (Container, error) {
	c, err := runtime.Load(root, id)
	if err != nil {
		return nil, err
	}
	return realContainer{c}, nil
}

func (realRuntime) Recover(root, id string, hint runtime.RecoverHint) (Container, error) {
	c, err := runtime.Recover(root, id, hint)
	if err != nil {
		return nil, err
	}
	return realContainer{c}, nil
}

func (realRuntime) ListIDs(root string) ([]string, error) { return runtime.ListIDs(root) }

func (realRuntime) Retired(root string) ([]Container, error) {
	cs, err := runtime.RetiredContainers(root)
	out := make([]Container, 0, len(cs))
	for _, c := range cs {
		out = append(out, realContainer{c})
	}
	return out, err
}

func (realRuntime) SetAside(root, id, reason string) error { return runtime.SetAside(root, id, reason) }

func (realRuntime) PruneAside(root string, keep int) ([]string, error) {
	return runtime.PruneAside(root, keep)
}

func (realRuntime) ListRunc(ctx context.Context, rt string, args []string) ([]runtime.RuncContainer, error) {
	return runtime.ListRunc(ctx, rt, args)
}

func (realRuntime) DeleteRunc(ctx context.Context, rt string, args []string, id string) error {
	return runtime.DeleteRunc(ctx, rt, args, id)
}

// realContainer turns *runtime.Process results into the Process interface.
type realContainer struct{ *runtime.Container }

func (c realContainer) Create(ctx context.Context, opts runtime.CreateOpts) (Process, error) {
	p, err := c.Container.Create(ctx, opts)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (c realContainer) Exec(ctx context.Context, pid string, spec specs.ProcessSpec, stdio runtime.Stdio, opts runtime.ExecOpts) (Process, error) {
	p, err := c.Container.Exec(ctx, pid, spec, stdio, opts)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (c realContainer) Records() Records { return runtimeRecords{c.Container} }

// runtimeRecords keeps the markers in the process dirs (docs/shim-contract.md:
// "started", "exit-published"); the init's start marker is the container's.
type runtimeRecords struct{ c *runtime.Container }

func (r runtimeRecords) MarkStarted(pid string) error {
	if pid == "init" {
		return r.c.MarkStarted()
	}
	p, ok := r.c.Process(pid)
	if !ok {
		return nil // removed already: nothing left for a restart to find
	}
	return p.MarkStarted()
}

func (r runtimeRecords) Started(pid string) bool {
	if pid == "init" {
		return r.c.Started()
	}
	p, ok := r.c.Process(pid)
	return ok && p.Started()
}

func (r runtimeRecords) MarkExitPublished(pid string) error {
	p, ok := r.c.Process(pid)
	if !ok {
		// Removed already (a retry of remove-exec after the marker was
		// written and the process dropped): nothing left to mark.
		return nil
	}
	return p.MarkExitPublished()
}

func (r runtimeRecords) ExitPublished(pid string) bool {
	p, ok := r.c.Process(pid)
	return ok && p.ExitPublished()
}

func (c realContainer) Processes() []Process {
	ps := c.Container.Processes()
	out := make([]Process, 0, len(ps))
	for _, p := range ps {
		out = append(out, p)
	}
	return out
}
