package runtime

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/bundle"
	"github.com/evjournal/containerd/internal/errmark"
)

// Defaults for the zero values of ContainerOpts.
const (
	DefaultRuntime      = "runc"
	DefaultShim         = "containerd-shim"
	DefaultStartTimeout = 30 * time.Second
)

// ContainerOpts describe a new container.
type ContainerOpts struct {
	Root         string        // daemon state dir; the container dir is Root/ID
	ID           string        // checked with ValidateID
	Bundle       string        // absolute; holds config.json
	Runtime      string        // runc binary name or path ("" = "runc")
	RuntimeArgs  []string      // global args before every runc subcommand (e.g. --root DIR)
	Shim         string        // shim binary name or path ("" = "containerd-shim")
	Labels       []string      // opaque, kept for State
	NoPivotRoot  bool          // runc create/restore --no-pivot
	StartTimeout time.Duration // bound on waiting for the shim's start report (0 = 30s)
}

// Container is one incarnation of a container id: its record on disk, its
// bundle's spec and its processes. Methods are safe for concurrent use.
type Container struct {
	root string
	rec  containerRecord // immutable after New/Load; rec.Spec is nil only in a record from before it was kept

	mu        sync.Mutex
	retired   bool                // guarded by mu: the dir is Root/.retired/<id>.<incarnation>
	processes map[string]*Process // guarded by mu

	cgMu   sync.Mutex
	cgDirs map[string][2]string // guarded by cgMu: init's cgroup dirs by controller, once found
}

// New validates opts, then creates Root/ID (0700) holding state.json and,
// when the runtime cannot read the bundle's spec dialect, the bundle the
// runtime gets instead (translate.go). On any error nothing is left on
// disk. A duplicate id is ErrAlreadyExists with the text "mkdir
// <Root>/<ID>: file exists"; a missing bundle is ErrNotFound with "open
// <bundle>/config.json: no such file or directory"; a config.json that
// cannot be translated is ErrInvalidArgument naming the member. config.json
// is read once, here, bounded (bundle.ReadFile), and never written; Load
// never reads it again.
func New(opts ContainerOpts) (*Container, error) {
	if err := ValidateID(opts.ID); err != nil {
		return nil, err
	}
	if opts.Root == "" {
		return nil, fmt.Errorf("container %q: empty state dir: %w", opts.ID, errdefs.ErrInvalidArgument)
	}
	spec, data, err := bundle.ReadConfigData(opts.Bundle)
	if err != nil {
		return nil, err
	}
	rec := newRecord(opts, spec)
	translated, err := translateFor(&rec, data)
	if err != nil {
		return nil, err
	}
	c := &Container{root: opts.Root, rec: rec, processes: map[string]*Process{}}
	if err := c.createDir(translated); err != nil {
		return nil, err
	}
	return c, nil
}

func newRecord(o ContainerOpts, spec *bundle.Config) containerRecord {
	r := containerRecord{
		ID: o.ID, Bundle: o.Bundle, Spec: spec, Runtime: o.Runtime, RuntimeArgs: o.RuntimeArgs, Shim: o.Shim,
		Labels: o.Labels, NoPivotRoot: o.NoPivotRoot, Created: time.Now().UTC(),
		Incarnation: randomHex(8), StartTimeout: o.StartTimeout,
	}
	if r.Runtime == "" {
		r.Runtime = DefaultRuntime
	}
	if r.Shim == "" {
		r.Shim = DefaultShim
	}
	if r.StartTimeout <= 0 {
		r.StartTimeout = DefaultStartTimeout
	}
	return r
}

// createDir makes Root/ID, the translated bundle if there is one, and
// state.json last, under the id lock so that a concurrent Delete of a
// retired incarnation sees either no dir or a complete one.
func (c *Container) createDir(translated []byte) error {
	unlock := lockID(c.root, c.rec.ID)
	defer unlock()
	dir := filepath.Join(c.root, c.rec.ID)
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return errmark.Mark(err, errdefs.ErrAlreadyExists) // "mkdir <Root>/<ID>: file exists"
		}
		return fmt.Errorf("container %q: %w", c.rec.ID, err)
	}
	if err := c.fillDir(dir, translated); err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("container %q: %w", c.rec.ID, err)
	}
	return nil
}

func (c *Container) fillDir(dir string, translated []byte) error {
	if translated != nil {
		if err := writeTranslated(dir, c.rec.Bundle, translated); err != nil {
			return err
		}
	}
	if err := writeJSON(filepath.Join(dir, stateFile), &c.rec); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	return nil
}

// ID is the container id.
func (c *Container) ID() string { return c.rec.ID }

// Bundle is the bundle path exactly as given to New.
func (c *Container) Bundle() string { return c.rec.Bundle }

// runtimeBundle is the bundle the runtime runs: the client's, or the
// daemon's translation of it in the container dir.
func (c *Container) runtimeBundle() string {
	if c.rec.Translated {
		return filepath.Join(c.Dir(), translatedDir)
	}
	return c.rec.Bundle
}

// Labels are the labels given to New.
func (c *Container) Labels() []string { return c.rec.Labels }

// Runtime is the runc binary (name or path).
func (c *Container) Runtime() string { return c.rec.Runtime }

// RuntimeArgs are runc's global args, placed before every subcommand.
func (c *Container) RuntimeArgs() []string { return c.rec.RuntimeArgs }

// Incarnation tells apart two containers that used the same id in turn.
func (c *Container) Incarnation() string { return c.rec.Incarnation }

// Created is when New made the container.
func (c *Container) Created() time.Time { return c.rec.Created }

// Spec is what the daemon kept of the bundle's config.json at create; nil
// only for a container recorded before the daemon kept it.
func (c *Container) Spec() *bundle.Config { return c.rec.Spec }

// Dir is the container's state dir: Root/ID, or its retired place.
func (c *Container) Dir() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dirLocked()
}

func (c *Container) dirLocked() string {
	if c.retired {
		return filepath.Join(retiredDir(c.root), retiredName(c.rec.ID, c.rec.Incarnation))
	}
	return filepath.Join(c.root, c.rec.ID)
}

// Processes returns init first, then the execs sorted by id.
func (c *Container) Processes() []*Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Process, 0, len(c.processes))
	for _, p := range c.processes {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return processLess(out[i].id, out[j].id) })
	return out
}

func processLess(a, b string) bool {
	if a == initID || b == initID {
		return a == initID && b != initID
	}
	return a < b
}

// Process returns the process with id pid ("init" or an exec id).
func (c *Container) Process(pid string) (*Process, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.processes[pid]
	return p, ok
}

func (c *Container) addProcess(p *Process) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.processes[p.id] = p
}

// RemoveProcess forgets an exec whose exit has been handled: it closes the
// daemon's fds, reaps the shim if it was this daemon's child and removes the
// process dir. The init process goes away with Delete instead.
func (c *Container) RemoveProcess(pid string) error {
	if pid == initID {
		return fmt.Errorf("container %q: remove process %q: the init process is removed by Delete: %w", c.rec.ID, pid, errdefs.ErrFailedPrecondition)
	}
	c.mu.Lock()
	p, ok := c.processes[pid]
	delete(c.processes, pid)
	dir := filepath.Join(c.dirLocked(), pid)
	c.mu.Unlock()
	if ok {
		p.Close()
	}
	// Idempotent: a retry after a failed removal (the process gone from
	// the table already) must finish the job, not fail for ever.
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("container %q: remove process %q: %w", c.rec.ID, pid, err)
	}
	return nil
}

// startedFile marks a container whose start-container event is journaled.
const startedFile = "started"

// MarkStarted records that the container's start was published, so that a
// restarted daemon can tell a running container from a create that a crash
// interrupted (which no client was ever told about).
func (c *Container) MarkStarted() error {
	dir := c.Dir()
	err := writeMarker(filepath.Join(dir, startedFile))
	if errors.Is(err, fs.ErrNotExist) && c.Dir() != dir {
		// An init that exits at once is retired (its dir moved) while the
		// marker is written: write it where the dir is now.
		err = writeMarker(filepath.Join(c.Dir(), startedFile))
	}
	if err != nil {
		return fmt.Errorf("container %q: mark started: %w", c.rec.ID, err)
	}
	return nil
}

// Started reports whether MarkStarted was done (by any daemon run).
func (c *Container) Started() bool { return exists(filepath.Join(c.Dir(), startedFile)) }
