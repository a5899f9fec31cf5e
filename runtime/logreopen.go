package runtime

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/bundle"
	"golang.org/x/sys/unix"
)

// ctlReopenLog is the control message "2 <token> 0": reopen the CRI log and
// answer token in logReopenFile (docs/shim-contract.md, Control FIFO).
const ctlReopenLog = 2

// reopenTimeout bounds the wait for the shim's answer to a reopen.
const reopenTimeout = 10 * time.Second

// ReopenLog makes the shim reopen the process's CRI log at its path, for
// CRI's ReopenContainerLog (kubelet renamed the file to rotate it), and
// waits for the shim's answer: once it returns nil, the output from then on
// goes to a new file at the log path. A process without a log path, or that
// is not running, is ErrFailedPrecondition; so is a reopen the shim could
// not do (the log dir is gone, say), and the old file then stays in use. No
// answer within ctx or 10 s is context.DeadlineExceeded. Concurrent calls
// for one process are served one at a time.
func (p *Process) ReopenLog(ctx context.Context) error {
	if p.rec.LogPath == "" {
		return fmt.Errorf("container %q: process %q has no log path: %w", p.c.ID(), p.id, errdefs.ErrFailedPrecondition)
	}
	p.reopenMu.Lock()
	defer p.reopenMu.Unlock()
	token := uint64(time.Now().UnixNano())
	if err := p.writeControl(fmt.Sprintf("%d %d 0\n", ctlReopenLog, token)); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, reopenTimeout)
	defer cancel()
	return p.awaitReopen(ctx, token)
}

// awaitReopen polls the shim's answer file for token: the shim answers in
// well under a millisecond, so the first looks come quickly.
func (p *Process) awaitReopen(ctx context.Context, token uint64) error {
	wait := time.Millisecond
	for {
		answered, err := p.reopenAnswer(token)
		if answered {
			return err
		}
		if p.State() == Stopped {
			return fmt.Errorf("container %q: process %q: exited before reopening its log: %w", p.c.ID(), p.id, errdefs.ErrFailedPrecondition)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("container %q: process %q: reopen log: no answer from the shim: %w", p.c.ID(), p.id, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, 20*time.Millisecond)
	}
}

// reopenAnswer reads logReopenFile: "<token>\n", or "<token> <error>\n"
// when the shim could not reopen. answered is false while the file holds
// no answer to token.
func (p *Process) reopenAnswer(token uint64) (answered bool, err error) {
	path := filepath.Join(p.dir(), logReopenFile)
	data, rerr := bundle.ReadFile(path, 4096)
	if rerr != nil {
		return false, nil // not yet there (or being replaced)
	}
	line := strings.TrimSuffix(string(data), "\n")
	got, msg, _ := strings.Cut(line, " ")
	if got != strconv.FormatUint(token, 10) {
		return false, nil
	}
	if msg != "" {
		return true, fmt.Errorf("container %q: process %q: reopen log %s: %s (the old file stays in use): %w",
			p.c.ID(), p.id, p.rec.LogPath, msg, errdefs.ErrFailedPrecondition)
	}
	return true, nil
}

// writeControl writes one line on the control FIFO (one write, far below
// PIPE_BUF: never interleaved with another line).
func (p *Process) writeControl(line string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.controlFD < 0 || p.stopped {
		return fmt.Errorf("container %q: process %q: not running: %w", p.c.ID(), p.id, errdefs.ErrFailedPrecondition)
	}
	if _, err := unix.Write(p.controlFD, []byte(line)); err != nil {
		return fmt.Errorf("container %q: process %q: write control fifo: %w", p.c.ID(), p.id, err)
	}
	return nil
}
