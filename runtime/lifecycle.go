package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"github.com/evjournal/containerd/bundle"
)

// shimExitTimeout bounds how long Delete waits for the shims of a container
// whose runc state it has just deleted (their processes are being killed).
const shimExitTimeout = 10 * time.Second

// Retire moves Root/ID to Root/.retired/<ID>.<incarnation> in one rename, so
// the id is free at once for a new New while this incarnation's exit is
// being published. Call it once init's exit is known. Its runc state stays
// until Delete (or until the next incarnation's Create clears it).
func (c *Container) Retire() error {
	unlock := lockID(c.root, c.rec.ID)
	defer unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.retired {
		return nil
	}
	live := filepath.Join(c.root, c.rec.ID)
	if !c.holdsQuick(live) {
		return fmt.Errorf("container %q: retire: %s is not incarnation %s: %w", c.rec.ID, live, c.rec.Incarnation, errdefs.ErrFailedPrecondition)
	}
	if err := os.MkdirAll(retiredDir(c.root), 0o700); err != nil {
		return fmt.Errorf("container %q: retire: %w", c.rec.ID, err)
	}
	if err := os.Rename(live, filepath.Join(retiredDir(c.root), retiredName(c.rec.ID, c.rec.Incarnation))); err != nil {
		return fmt.Errorf("container %q: retire: %w", c.rec.ID, err)
	}
	c.retired = true
	syncDir(retiredDir(c.root))
	return syncDir(c.root)
}

// holdsQuick is holds for the exit path (Retire precedes the exit event):
// the incarnation is a random token, so finding it as the value of an
// "incarnation" key in the file's bytes says the same as decoding the whole
// record (which holds the bundle's spec), in a fraction of the time: about
// 40 µs instead of 130 on the exit path of the bench. Anything else falls
// back to holds.
func (c *Container) holdsQuick(dir string) bool {
	data, err := bundle.ReadFile(filepath.Join(dir, stateFile), maxStateFile)
	if err != nil {
		return false
	}
	if namesIncarnation(data, c.rec.Incarnation) {
		return true
	}
	return c.holds(dir)
}

// namesIncarnation reports whether some "incarnation" key of the JSON in
// data has the string value inc, with or without the space writeJSON's
// indentation puts after the colon. (Until 2026-11-27 only the compact form
// was looked for, which the indented state.json never matches: every
// Retire decoded the whole record.) A false answer only means "decode it".
func namesIncarnation(data []byte, inc string) bool {
	key := []byte(`"incarnation":`)
	val := []byte(`"` + inc + `"`)
	for {
		i := bytes.Index(data, key)
		if i < 0 {
			return false
		}
		data = data[i+len(key):]
		if bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), val) {
			return true
		}
	}
}

// holds reports whether dir holds this incarnation's state.json.
func (c *Container) holds(dir string) bool {
	var rec containerRecord
	return readJSON(filepath.Join(dir, stateFile), &rec) == nil && rec.Incarnation == c.rec.Incarnation
}

// Delete removes the container: `runc delete --force <id>` (unless another
// incarnation now holds Root/ID, whose runc state that is), a bounded wait
// for the shims to go, then the container dir (live or retired). Idempotent.
func (c *Container) Delete(ctx context.Context) error {
	if err := c.deleteRuncIfOwner(ctx); err != nil {
		return err
	}
	c.waitShims(shimExitTimeout)
	c.closeProcesses()
	return c.removeDir()
}

// abandonWait bounds DeleteAbandoned's wait for the shims of a create a
// crash cut short.
const abandonWait = 30 * time.Second

// DeleteAbandoned is Delete for a container whose create a crash cut short.
// Its shim outlived the daemon and may still be inside runc create or
// start: runc state may appear after a first delete, and the shim then
// runs a container that nobody was told of (the reliability suite's CRI
// chaos saw one run on after the restart's cleanup). So runc delete
// --force is repeated until every shim of the container is gone (a shim
// exits once its process died, or once its create failed), and only then
// is the dir removed. After abandonWait it fails: the caller retries.
func (c *Container) DeleteAbandoned(ctx context.Context) error {
	deadline := time.Now().Add(abandonWait)
	for {
		if err := c.deleteRuncIfOwner(ctx); err != nil {
			return err
		}
		if c.awaitShims(time.Second) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("container %q: a shim still runs %s after the delete of a create cut short", c.rec.ID, abandonWait)
		}
	}
	// What the create made before its shim went.
	if err := c.deleteRuncIfOwner(ctx); err != nil {
		return err
	}
	c.closeProcesses()
	return c.removeDir()
}

// awaitShims waits up to d for the shim of every process, known by its pid
// and start time, to be gone; it reports whether they all are.
func (c *Container) awaitShims(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for _, p := range c.Processes() {
		fd, err := openVerifiedPidfd(p.shimPid, p.shimStart)
		if err != nil {
			continue // gone, or never known
		}
		gone := pollFor(fd, unix.POLLIN, unix.POLLIN|unix.POLLHUP, max(time.Until(deadline), 0))
		unix.Close(fd)
		if !gone {
			return false
		}
	}
	return true
}

func (c *Container) deleteRuncIfOwner(ctx context.Context) error {
	unlock := lockID(c.root, c.rec.ID)
	defer unlock()
	live := filepath.Join(c.root, c.rec.ID)
	if _, err := os.Lstat(live); err == nil && !c.holds(live) {
		return nil // a new incarnation owns the id and its runc state
	}
	return c.deleteRuncState(ctx)
}

// waitShims waits, up to timeout in all, for each live process's exit FIFO
// to hang up.
func (c *Container) waitShims(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for _, p := range c.Processes() {
		if fd := p.ExitFD(); fd >= 0 && p.State() == Running {
			hungUp(fd, max(time.Until(deadline), 0))
		}
	}
}

func (c *Container) closeProcesses() {
	c.mu.Lock()
	ps := c.processes
	c.processes = map[string]*Process{}
	c.mu.Unlock()
	for _, p := range ps {
		p.Close()
	}
}

// removeDir removes the retired dir, or Root/ID if it is still this
// incarnation's.
func (c *Container) removeDir() error {
	unlock := lockID(c.root, c.rec.ID)
	defer unlock()
	dir := c.Dir()
	if !c.isRetired() && !c.holds(dir) {
		return nil
	}
	if err := os.RemoveAll(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("container %q: delete: %w", c.rec.ID, err)
	}
	return nil
}

func (c *Container) isRetired() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.retired
}

// Discard removes what the daemon itself keeps of a container whose
// runtime keeps failing to delete it (a failed create naming a runtime that
// fails at once, such as /bin/false): its known processes are killed
// (through verified pidfds), its shims awaited, its dir removed, so the id
// is free again. The runtime's own state of the id, if it has any, is left;
// the caller logs that. Idempotent.
func (c *Container) Discard() error {
	for _, p := range c.Processes() {
		if p.pid > 0 && p.State() == Running {
			signalVerified(p.pid, p.startTime, syscall.SIGKILL)
		}
	}
	c.waitShims(shimExitTimeout)
	c.closeProcesses()
	return c.removeDir()
}
