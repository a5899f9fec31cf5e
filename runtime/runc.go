package runtime

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"
	gorunc "github.com/containerd/go-runc"
	"github.com/evjournal/containerd/bundle"
	"github.com/evjournal/containerd/specs"
)

// RuncError is a failed runc command the daemon ran directly. Its text is
// v0.2's `<exit status>: "<runtime output>"` (docs/api.md 3.0); callers add
// context by wrapping it.
type RuncError struct {
	Op     string // runc subcommand: "start", "pause", ...
	Status int    // runc's exit status; -1 when runc could not run or gave no status
	Output string // runc's combined output, or the failure to run it
}

func (e *RuncError) Error() string {
	if e.Status < 0 {
		return e.Output
	}
	return fmt.Sprintf("exit status %d: %q", e.Status, e.Output)
}

// Is classifies the failure: runc's "does not exist" is ErrNotFound, another
// refusal (e.g. pausing a paused container) ErrFailedPrecondition, and a runc
// that could not run at all ErrInternal.
func (e *RuncError) Is(target error) bool {
	switch {
	case runcNotExist(e.Output):
		return target == errdefs.ErrNotFound
	case e.Status > 0:
		return target == errdefs.ErrFailedPrecondition
	}
	return target == errdefs.ErrInternal
}

// runcNotExist recognises runc's own message for an unknown container id,
// as a whole line of its output (a logrus text line's msg counts): runc
// gives no exit code for it, so the text is all there is. Any other line
// that happens to say "does not exist" (a CRIU log quoted by a failed
// checkpoint, a missing mount source) is not it.
func runcNotExist(output string) bool {
	for _, line := range strings.Split(output, "\n") {
		line = strings.TrimSpace(line)
		if m := logrusMsg.FindStringSubmatch(line); m != nil {
			if msg, err := strconv.Unquote(`"` + m[1] + `"`); err == nil {
				line = msg
			}
		}
		if runcNotExistLine.MatchString(line) {
			return true
		}
	}
	return false
}

// runcNotExistLine is runc's unknown-id message: today's "container does
// not exist", 1.0's `container "<id>" does not exist`, rc2's
// `container "<id>" does not exists` and (delete) "container <id> is not exist".
var runcNotExistLine = regexp.MustCompile(`^(?:container does not exist|container "[^"]*" does not exists?|container \S+ is not exist)$`)

// logrusMsg is the msg of a logrus text line (runc's stderr format).
var logrusMsg = regexp.MustCompile(`^time=\S+ level=\w+ msg="((?:[^"\\]|\\.)*)"`)

// goRuncFailure is how go-runc formats a failed command: the exit error,
// ": ", then runc's combined output. go-runc drops its typed *ExitError on
// this path, so the status is read back from the text.
var goRuncFailure = regexp.MustCompile(`(?s)^.* did not terminate successfully: exit status (\d+): (.*)$`)

// runcError turns a go-runc error into a *RuncError wrapped with the
// container and subcommand. A cancelled ctx wins over runc's own failure.
func (c *Container) runcError(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("container %q: %s: %w", c.rec.ID, op, ctx.Err())
	}
	return fmt.Errorf("container %q: %s: %w", c.rec.ID, op, parseRuncError(op, err))
}

func parseRuncError(op string, err error) *RuncError {
	m := goRuncFailure.FindStringSubmatch(err.Error())
	if m == nil {
		return &RuncError{Op: op, Status: -1, Output: err.Error()}
	}
	status, _ := strconv.Atoi(m[1])
	return &RuncError{Op: op, Status: status, Output: m[2]}
}

// runc is a go-runc client for this container's runtime and global args.
func (c *Container) runc() *gorunc.Runc {
	return &gorunc.Runc{Command: c.rec.Runtime, ExtraArgs: c.rec.RuntimeArgs}
}

// Start runs `runc start <id>` for an init created without a checkpoint (a
// restored init is running already).
func (c *Container) Start(ctx context.Context) error {
	if p, ok := c.Process(initID); ok && p.rec.Checkpoint != "" {
		return fmt.Errorf("container %q: start: restored from a checkpoint, already running: %w", c.rec.ID, errdefs.ErrFailedPrecondition)
	}
	if err := c.runc().Start(ctx, c.rec.ID); err != nil {
		return c.runcError(ctx, "start", err)
	}
	return nil
}

// Pause freezes the container (`runc pause`). A runc failure is v0.2.9's
// text exactly, `exit status N: "<runc output>"`, nothing prepended
// (clients prefix-match it; docs/api.md 3.3).
func (c *Container) Pause(ctx context.Context) error {
	if err := c.runc().Pause(ctx, c.rec.ID); err != nil {
		return c.bareRuncError(ctx, "pause", err)
	}
	return nil
}

// Resume thaws the container (`runc resume`), failing as Pause does.
func (c *Container) Resume(ctx context.Context) error {
	if err := c.runc().Resume(ctx, c.rec.ID); err != nil {
		return c.bareRuncError(ctx, "resume", err)
	}
	return nil
}

// bareRuncError is a *RuncError with v0.2.9's text and no context added;
// a cancelled ctx still wins.
func (c *Container) bareRuncError(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return c.runcError(ctx, op, err)
	}
	return parseRuncError(op, err)
}

// RuncOutputError is a failed `runc update` as v0.2.9 answered it: runc's
// output alone. It classifies and unwraps as its *RuncError.
type RuncOutputError struct{ *RuncError }

func (e *RuncOutputError) Error() string { return e.Output }

// Unwrap gives the *RuncError (errors.As finds it).
func (e *RuncOutputError) Unwrap() error { return e.RuncError }

// Status is runc's view of the container: created, running, paused or stopped.
func (c *Container) Status(ctx context.Context) (string, error) {
	st, err := c.runc().State(ctx, c.rec.ID)
	if err != nil {
		return "", c.runcError(ctx, "state", err)
	}
	return st.Status, nil
}

// Pids lists the host pids of the container's processes (`runc ps`).
func (c *Container) Pids(ctx context.Context) ([]int, error) {
	if pids, ok := c.cgroupPids(); ok {
		return pids, nil
	}
	pids, err := c.runc().Ps(ctx, c.rec.ID)
	if err != nil {
		return nil, c.runcError(ctx, "ps", err)
	}
	return pids, nil
}

// UpdateResources applies r with `runc update --resources=-`, r written
// in the dialect of the spec the runtime runs: the bundle's, or its
// translation's (docs/api.md 7.1, 7.3). A nil r is a no-op. A failure answers runc's output as it is (v0.2.9's text).
func (c *Container) UpdateResources(ctx context.Context, r *specs.LinuxResources) error {
	if r == nil {
		return nil
	}
	var d bundle.Dialect
	if c.rec.Spec != nil {
		d = c.rec.Spec.Dialect
	}
	data, err := d.EncodeResources(r)
	if err != nil {
		return fmt.Errorf("container %q: update: %w", c.rec.ID, err)
	}
	args := append(append([]string{}, c.rec.RuntimeArgs...), "update", "--resources=-", c.rec.ID)
	cmd := exec.CommandContext(ctx, c.rec.Runtime, args...)
	cmd.Stdin = bytes.NewReader(data)
	out, err := cmd.CombinedOutput()
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("container %q: update: %w", c.rec.ID, ctx.Err())
	}
	re := &RuncError{Op: "update", Status: -1, Output: err.Error()}
	if ee, ok := err.(*exec.ExitError); ok {
		re.Status, re.Output = ee.ExitCode(), string(out)
	}
	return &RuncOutputError{re}
}

// deleteRuncState runs `runc delete --force <id>` if the runc state of the id
// is this incarnation's: it must not be older than the container record, so a
// foreign container that happens to use the id in the same runc root (the
// reason our runc create failed, say) is never killed. An unknown id is success.
func (c *Container) deleteRuncState(ctx context.Context) error {
	st, err := c.runc().State(ctx, c.rec.ID)
	if err != nil {
		if re := parseRuncError("state", err); runcNotExist(re.Output) && ctx.Err() == nil {
			return nil
		}
		if _, lerr := exec.LookPath(c.rec.Runtime); lerr != nil {
			// A runtime that cannot be run (one a failed create named) has
			// made no state; failing here would leave the container dir
			// behind and its id taken.
			return nil
		}
		return c.runcError(ctx, "state", err)
	}
	if st.Created.Before(c.rec.Created) {
		return nil
	}
	// --force on a stopped container costs runc ~100 ms of waiting for
	// nothing; it is only needed while something may still run.
	return c.deleteRunc(ctx, st.Status != "stopped")
}

func (c *Container) forceDeleteRunc(ctx context.Context) error { return c.deleteRunc(ctx, true) }

func (c *Container) deleteRunc(ctx context.Context, force bool) error {
	err := c.runc().Delete(ctx, c.rec.ID, &gorunc.DeleteOpts{Force: force})
	if err == nil {
		return nil
	}
	if re := parseRuncError("delete", err); runcNotExist(re.Output) && ctx.Err() == nil {
		return nil
	}
	return c.runcError(ctx, "delete", err)
}

// clearStaleRuncState removes the runc state a previous, retired incarnation
// of this id left behind (stopped: its init has exited), so that runc create
// can reuse the id. A live runc container of that id is left alone; runc
// create then fails and says why.
func (c *Container) clearStaleRuncState(ctx context.Context) error {
	if root, ok := runcRoot(c.rec.Runtime, c.rec.RuntimeArgs); ok {
		if _, err := os.Stat(filepath.Join(root, c.rec.ID)); os.IsNotExist(err) {
			return nil // nothing left: spare the runc call on every create
		}
	}
	st, err := c.runc().State(ctx, c.rec.ID)
	if err != nil || st.Status != "stopped" {
		return nil
	}
	return c.forceDeleteRunc(ctx)
}

// runcRoot is the state dir runc uses with these global args: --root DIR or
// --root=DIR, else runc's default. ok is false for another runtime, whose
// layout is unknown. Docker 1.11-1.13 name their runc docker-runc: without
// it here every create of theirs paid a `runc state` call (clearStaleRuncState)
// and each daemon start on a fresh host warned that runc list failed.
func runcRoot(runtime string, args []string) (string, bool) {
	if base := filepath.Base(runtime); base != "runc" && base != "docker-runc" {
		return "", false
	}
	root := "/run/runc"
	for i, a := range args {
		switch {
		case a == "--root" && i+1 < len(args):
			root = args[i+1]
		case strings.HasPrefix(a, "--root="):
			root = strings.TrimPrefix(a, "--root=")
		}
	}
	return root, true
}
