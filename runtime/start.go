package runtime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/bundle"
	"github.com/evjournal/containerd/internal/atomicfile"
	"github.com/evjournal/containerd/internal/cgroupwarm"
	"github.com/evjournal/containerd/internal/errmark"
	"github.com/evjournal/containerd/specs"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// Stdio are host paths (usually FIFOs the client made) for a process's
// stdin, stdout and stderr; "" means /dev/null.
type Stdio struct {
	Stdin, Stdout, Stderr string
	// LogPath, when set, is a CRI log file (kubelet's LogPath): the shim
	// writes the process's stdout and stderr into it as records of the
	// "stdout" and "stderr" streams (with a terminal, all is "stdout"), so
	// output keeps flowing while the daemon restarts. Stdout and Stderr
	// must then be "". The file is created if missing (0640) and appended
	// to; Process.ReopenLog reopens it after a rotation. See ValidateStdio.
	LogPath string
}

// CreateOpts describe the init process.
type CreateOpts struct {
	Stdio          Stdio
	Checkpoint     string         // image dir to restore from; "" = fresh create
	CheckpointOpts CheckpointOpts // restore settings; zero = those saved in <Checkpoint>/config.json
	// Start: the shim also runs `runc start` (a fresh create only), so the
	// init is running when Create returns, one hand-off sooner than a
	// separate Start. The OOM counters it read before the start are given
	// by OOMBaseline, so an OOM watch armed afterwards misses no kill.
	Start bool
}

// Create starts the init process through a shim: `runc create` (or `runc
// restore -d` from opts.Checkpoint). A fresh init is created, not started
// (call Start once the exit and OOM monitors are armed), unless opts.Start
// asks the shim to start it too; a failed start is then the error Start
// gives (`container "<id>": start: exit status N: "<output>"`). The error texts are
// v0.2's (docs/api.md 3.0): *OCIRuntimeError, *ShimError, ErrShimExited,
// ErrStartTimeout, ctx.Err(), "<shim> not installed on system". On failure
// the shim is killed, the runc state deleted and the process dir removed;
// the container dir stays for Delete.
func (c *Container) Create(ctx context.Context, opts CreateOpts) (*Process, error) {
	rec, err := c.initRecord(opts)
	if err != nil {
		return nil, err
	}
	before := func() error { return nil }
	if opts.Checkpoint == "" {
		before = func() error { return c.clearStaleRuncState(ctx) }
	}
	return c.startProcess(ctx, initID, rec, before)
}

func (c *Container) initRecord(opts CreateOpts) (processRecord, error) {
	if err := validateLog(opts.Stdio); err != nil {
		return processRecord{}, fmt.Errorf("container %q: %w", c.rec.ID, err)
	}
	if c.rec.Spec == nil {
		return processRecord{}, fmt.Errorf("container %q: bundle config.json unavailable: %w", c.rec.ID, errdefs.ErrFailedPrecondition)
	}
	rec := c.newRecord(c.rec.Spec.Process, opts.Stdio)
	rec.NoPivotRoot = c.rec.NoPivotRoot
	if opts.Checkpoint != "" {
		co, err := restoreOpts(opts.Checkpoint, opts.CheckpointOpts)
		if err != nil {
			return processRecord{}, fmt.Errorf("container %q: restore: %w", c.rec.ID, err)
		}
		rec.Checkpoint, rec.CheckpointOpts = opts.Checkpoint, co
	}
	if opts.Start && opts.Checkpoint != "" {
		return processRecord{}, fmt.Errorf("container %q: a restore is running when created; Start is for a fresh create: %w", c.rec.ID, errdefs.ErrInvalidArgument)
	}
	rec.Start = opts.Start
	return rec, nil
}

// ExecOpts are the options of an exec beyond its process and stdio.
type ExecOpts struct {
	// Ephemeral: the exec is never reported after a daemon restart (the
	// CRI's ExecSync: supervisor.ExecRequest.Ephemeral), so its files
	// need not survive the machine: the daemon and its shim write them
	// without fsync ("ephemeral" in process.json, docs/shim-contract.md).
	Ephemeral bool
	// DirectOutput (an ephemeral exec with FIFOs as Stdout and Stderr,
	// whose reader keeps them open and drains them): the process writes
	// into the FIFOs itself, with no copy by its shim ("directOutput").
	DirectOutput bool
}

// Exec starts an extra process in the container (`runc exec -d`) through its
// own shim, with the same errors and cleanup as Create. A process id in use
// (including "init") is ErrAlreadyExists "mkdir <Root>/<ID>/<pid>: file exists".
func (c *Container) Exec(ctx context.Context, pid string, spec specs.ProcessSpec, stdio Stdio, opts ...ExecOpts) (*Process, error) {
	if err := ValidateID(pid); err != nil {
		return nil, fmt.Errorf("container %q: exec: %w", c.rec.ID, err)
	}
	if pid == initID {
		path := filepath.Join(c.Dir(), initID)
		return nil, errmark.Mark(&fs.PathError{Op: "mkdir", Path: path, Err: syscall.EEXIST}, errdefs.ErrAlreadyExists)
	}
	if err := validateLog(stdio); err != nil {
		return nil, fmt.Errorf("container %q: exec %q: %w", c.rec.ID, pid, err)
	}
	rec := c.newRecord(spec, stdio)
	rec.Exec = true
	for _, o := range opts {
		rec.Ephemeral = rec.Ephemeral || o.Ephemeral
		rec.DirectOutput = rec.DirectOutput || o.DirectOutput
	}
	if rec.DirectOutput && (!rec.Ephemeral || rec.Terminal || stdio.LogPath != "") {
		return nil, fmt.Errorf("container %q: exec %q: direct output is for an ephemeral exec without a terminal or a CRI log: %w", c.rec.ID, pid, errdefs.ErrInvalidArgument)
	}
	return c.startProcess(ctx, pid, rec, func() error { return nil })
}

// newRecord describes a process of this container. Its process object is
// written in the dialect of the spec the runtime runs (the bundle's, or
// its translation's: Config.Dialect), as the container's runtime reads it
// (a record from before the daemon kept the bundle's config: today's
// dialect, root ids 0).
func (c *Container) newRecord(spec specs.ProcessSpec, stdio Stdio) processRecord {
	var bc bundle.Config
	if c.rec.Spec != nil {
		bc = *c.rec.Spec
	}
	return processRecord{
		Process: spec, dialect: bc.Dialect, Stdin: stdio.Stdin, Stdout: stdio.Stdout, Stderr: stdio.Stderr, LogPath: stdio.LogPath,
		Terminal: spec.Terminal, Runtime: c.rec.Runtime, RuntimeArgs: nonNil(c.rec.RuntimeArgs),
		CheckpointOpts: shimCheckpointOpts{EmptyNS: []string{}}, RootUID: bc.RootUID, RootGID: bc.RootGID,
		Features: RuntimeFeatures(c.rec.Runtime),
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// joinWarmer keeps the kernel's cgroup migration lock ready while process
// starts are under way, one for the whole daemon.
var joinWarmer = cgroupwarm.New(logrus.WithField("module", "runtime"))

// startProcess makes the process dir, runs before, then the shim, and
// registers the process once the shim reports its pid.
func (c *Container) startProcess(ctx context.Context, id string, rec processRecord, before func() error) (*Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// From here until the shim's report runc starts and joins the
	// container's cgroups: the lock those joins take is kept ready
	// meanwhile (internal/cgroupwarm).
	defer joinWarmer.Hold()()
	dir, err := c.mkProcessDir(id)
	if err != nil {
		return nil, err
	}
	p, err := c.prepareProcess(dir, id, rec)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("container %q: process %q: %w", c.rec.ID, id, err)
	}
	if err := before(); err != nil {
		p.abortStart(ctx, nil)
		return nil, err
	}
	sp, err := p.runShim(ctx)
	if err != nil {
		p.abortStart(ctx, sp)
		return nil, err
	}
	c.addProcess(p)
	return p, nil
}

// mkProcessDir creates Dir()/id under c.mu, so Retire cannot move the
// container dir between choosing the path and creating it.
func (c *Container) mkProcessDir(id string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.retired {
		return "", fmt.Errorf("container %q: its init has exited: %w", c.rec.ID, errdefs.ErrFailedPrecondition)
	}
	dir := filepath.Join(c.dirLocked(), id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return "", errmark.Mark(err, errdefs.ErrAlreadyExists) // "mkdir <Root>/<ID>/<pid>: file exists"
		}
		return "", fmt.Errorf("container %q: %w", c.rec.ID, err)
	}
	return dir, nil
}

// prepareProcess writes process.json, makes the exit and control FIFOs and
// opens them: exit before the shim starts, so its hang-up is never missed.
func (c *Container) prepareProcess(dir, id string, rec processRecord) (*Process, error) {
	write := writeFileAtomic
	if rec.Ephemeral {
		write = atomicfile.WriteUnsynced
	}
	if err := writeJSONWith(write, filepath.Join(dir, processFile), &rec); err != nil {
		return nil, err
	}
	for _, name := range []string{exitFifo, controlFifo} {
		if err := unix.Mkfifo(filepath.Join(dir, name), 0o600); err != nil {
			return nil, &fs.PathError{Op: "mkfifo", Path: filepath.Join(dir, name), Err: err}
		}
	}
	exitFD, controlFD, err := openFifos(dir)
	if err != nil {
		return nil, err
	}
	return &Process{c: c, id: id, rec: rec, exitFD: exitFD, controlFD: controlFD, shimPidfd: -1}, nil
}

// abortStart undoes a failed start: kill the shim (and, for an exec, the
// process it may have started), delete the runc state of a failed init,
// close the fds and remove the process dir.
func (p *Process) abortStart(ctx context.Context, sp *shimProc) {
	log := logrus.WithFields(logrus.Fields{"container": p.c.ID(), "pid": p.id})
	exec := -1
	if p.rec.Exec {
		// Pinned while the shim lives: its descendants are still known.
		var err error
		if exec, err = pinStartedExec(p.dir(), sp); err != nil {
			log.WithError(err).Warn("failed start: the exec runc may have started is not killed: its identity cannot be verified")
		}
	}
	if sp != nil {
		sp.kill()
	}
	if p.rec.Exec {
		killPinned(exec)
	} else if err := p.c.deleteRuncState(context.WithoutCancel(ctx)); err != nil {
		log.WithError(err).Warn("failed start: runc delete")
	}
	p.Close()
	if err := os.RemoveAll(p.dir()); err != nil {
		log.WithError(err).Warn("failed start: remove process dir")
	}
}
