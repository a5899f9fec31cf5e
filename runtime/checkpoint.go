package runtime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/containerd/errdefs"
	gorunc "github.com/containerd/go-runc"
	"github.com/evjournal/containerd/internal/errmark"
)

// CheckpointOpts are the settings of a checkpoint (and of a restore from it).
type CheckpointOpts struct {
	Name        string   // checked with ValidateID
	Exit        bool     // stop the container after the checkpoint (else --leave-running)
	TCP         bool     // --tcp-established
	UnixSockets bool     // --ext-unix-sk
	Shell       bool     // --shell-job
	EmptyNS     []string // --empty-ns, one per namespace
}

// Checkpoint is one saved checkpoint, as listed by Checkpoints.
type Checkpoint struct {
	Name    string
	Created time.Time
	CheckpointOpts
}

// checkpointRecord is <dir>/<name>/config.json, in v0.2's layout.
type checkpointRecord struct {
	Created     time.Time `json:"created"`
	Name        string    `json:"name"`
	TCP         bool      `json:"tcp"`
	UnixSockets bool      `json:"unixSockets"`
	Shell       bool      `json:"shell"`
	Exit        bool      `json:"exit"`
	EmptyNS     []string  `json:"emptyNS,omitempty"`
}

func (r checkpointRecord) checkpoint() Checkpoint {
	return Checkpoint{Name: r.Name, Created: r.Created, CheckpointOpts: CheckpointOpts{
		Name: r.Name, Exit: r.Exit, TCP: r.TCP, UnixSockets: r.UnixSockets, Shell: r.Shell, EmptyNS: r.EmptyNS,
	}}
}

// checkpointDir is dir, or <bundle>/checkpoints when dir is "".
func (c *Container) checkpointDir(dir string) string {
	if dir == "" {
		return filepath.Join(c.rec.Bundle, "checkpoints")
	}
	return dir
}

// Checkpoint saves the container to <dir>/<o.Name> (v0.2 semantics, compat
// doc 3.7): mkdir -p dir, mkdir dir/name (a name in use is ErrAlreadyExists),
// write config.json and the marker that lets DeleteCheckpoint remove it,
// then `runc [args] checkpoint --image-path <p> --work-path <p>/criu.work
// ...`. A failed checkpoint leaves nothing it made behind: neither dir/name
// nor the dirs of dir it created.
func (c *Container) Checkpoint(ctx context.Context, dir string, o CheckpointOpts) error {
	if err := ValidateID(o.Name); err != nil {
		return fmt.Errorf("container %q: checkpoint: %w", c.rec.ID, err)
	}
	dir = c.checkpointDir(dir)
	made, err := mkdirAllTracked(dir)
	if err != nil {
		return fmt.Errorf("container %q: checkpoint: %w", c.rec.ID, err)
	}
	if err := c.checkpointNew(ctx, filepath.Join(dir, o.Name), o); err != nil {
		removeMade(made)
		return err
	}
	return nil
}

// checkpointNew makes path (it must not exist) and checkpoints into it; on
// failure path is removed.
func (c *Container) checkpointNew(ctx context.Context, path string, o CheckpointOpts) error {
	if err := os.Mkdir(path, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return errmark.Mark(err, errdefs.ErrAlreadyExists)
		}
		return fmt.Errorf("container %q: checkpoint: %w", c.rec.ID, err)
	}
	if err := c.checkpointInto(ctx, path, o); err != nil {
		os.RemoveAll(path)
		return err
	}
	return nil
}

// mkdirAllTracked is os.MkdirAll that returns the dirs it created, deepest
// last, so that a failure can remove exactly those.
func mkdirAllTracked(dir string) ([]string, error) {
	var missing []string
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil || p == filepath.Dir(p) {
			break
		}
		missing = append(missing, p)
	}
	slices.Reverse(missing)
	for i, p := range missing {
		if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			removeMade(missing[:i])
			return nil, err
		}
	}
	return missing, nil
}

// removeMade removes the dirs mkdirAllTracked made, deepest first; each
// only if empty (os.Remove), so nothing someone put there meanwhile is lost.
func removeMade(dirs []string) {
	for i := len(dirs) - 1; i >= 0; i-- {
		os.Remove(dirs[i])
	}
}

func (c *Container) checkpointInto(ctx context.Context, path string, o CheckpointOpts) error {
	rec := checkpointRecord{Created: time.Now().UTC(), Name: o.Name, TCP: o.TCP, UnixSockets: o.UnixSockets,
		Shell: o.Shell, Exit: o.Exit, EmptyNS: o.EmptyNS}
	if err := writeJSON(filepath.Join(path, "config.json"), &rec); err != nil {
		return fmt.Errorf("container %q: checkpoint: %w", c.rec.ID, err)
	}
	if err := writeJSON(filepath.Join(path, checkpointMarker), markerOf(o.Name)); err != nil {
		return fmt.Errorf("container %q: checkpoint: %w", c.rec.ID, err)
	}
	var actions []gorunc.CheckpointAction
	if !o.Exit {
		actions = append(actions, gorunc.LeaveRunning)
	}
	if err := c.runc().Checkpoint(ctx, c.rec.ID, runcCheckpointOpts(path, o), actions...); err != nil {
		return c.runcError(ctx, "checkpoint", err)
	}
	return nil
}

// runcCheckpointOpts are runc's checkpoint flags; go-runc places them after
// the subcommand and the global runtime args before it.
func runcCheckpointOpts(path string, o CheckpointOpts) *gorunc.CheckpointOpts {
	return &gorunc.CheckpointOpts{
		ImagePath: path, WorkDir: filepath.Join(path, "criu.work"),
		AllowOpenTCP: o.TCP, AllowExternalUnixSockets: o.UnixSockets, AllowTerminal: o.Shell,
		EmptyNamespaces: o.EmptyNS,
	}
}

// Checkpoints lists the checkpoints in dir ("" = <bundle>/checkpoints) in
// lexical order. Each subdirectory is one and must hold a readable
// config.json; plain files are skipped. A missing dir is ErrNotFound
// ("open <dir>: no such file or directory").
func (c *Container) Checkpoints(dir string) ([]Checkpoint, error) {
	dir = c.checkpointDir(dir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errmark.Mark(err, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	var out []Checkpoint
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		var rec checkpointRecord
		if err := readClientJSON(filepath.Join(dir, e.Name(), "config.json"), &rec); err != nil {
			return nil, fmt.Errorf("container %q: checkpoint %q: %w", c.rec.ID, e.Name(), err)
		}
		out = append(out, rec.checkpoint())
	}
	return out, nil
}

// DeleteCheckpoint removes <dir>/<name>; a missing checkpoint is success.
// The dir is a client's path, and the daemon runs as root: only a real
// directory holding the marker a Checkpoint of this daemon wrote for that
// name is removed; anything else is ErrFailedPrecondition, untouched.
func (c *Container) DeleteCheckpoint(dir, name string) error {
	if err := ValidateID(name); err != nil {
		return fmt.Errorf("container %q: delete checkpoint: %w", c.rec.ID, err)
	}
	path := filepath.Join(c.checkpointDir(dir), name)
	err := checkMarker(path, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("container %q: delete checkpoint %q: %w", c.rec.ID, name, err)
	}
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("container %q: delete checkpoint %q: %w", c.rec.ID, name, err)
	}
	return nil
}

// restoreOpts are the shim's restore settings: the given ones, or the ones
// saved in <image>/config.json when none are given.
func restoreOpts(image string, o CheckpointOpts) (shimCheckpointOpts, error) {
	if !filepath.IsAbs(image) {
		return shimCheckpointOpts{}, fmt.Errorf("checkpoint path %q is not absolute: %w", image, errdefs.ErrInvalidArgument)
	}
	if o.isZero() {
		var rec checkpointRecord
		err := readClientJSON(filepath.Join(image, "config.json"), &rec)
		if errors.Is(err, fs.ErrNotExist) {
			return shimCheckpointOpts{}, errmark.Mark(err, errdefs.ErrNotFound)
		}
		if err != nil {
			return shimCheckpointOpts{}, fmt.Errorf("%w: %w", err, errdefs.ErrInvalidArgument)
		}
		o = rec.checkpoint().CheckpointOpts
	}
	return shimCheckpointOpts{TCP: o.TCP, UnixSockets: o.UnixSockets, Shell: o.Shell, EmptyNS: nonNil(o.EmptyNS)}, nil
}

func (o CheckpointOpts) isZero() bool {
	return !o.Exit && !o.TCP && !o.UnixSockets && !o.Shell && len(o.EmptyNS) == 0
}
