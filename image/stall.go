package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/containerd/errdefs"
)

// stallWatch is the pull progress timeout of one registry request: its
// context is cancelled, with a stalledError as the cause, once the timeout
// passes without a byte of the response. The time to the response headers
// counts; each read that returns data re-arms the timer. A request waiting
// for its turn (MaxConcurrentDownloads) has not started and is not watched.
type stallWatch struct {
	ctx     context.Context
	cancel  context.CancelCauseFunc
	timeout time.Duration
	timer   *time.Timer // nil without a timeout
}

// stalledError is the failure of a request that went silent; unavailable,
// as a registry that does not answer.
type stalledError struct {
	what    string
	timeout time.Duration
}

func (e *stalledError) Error() string {
	return fmt.Sprintf("%s: no byte from the registry for %s (the pull progress timeout)", e.what, e.timeout)
}

func (e *stalledError) Unwrap() error { return errdefs.ErrUnavailable }

// watchStall starts the watch of the request what ("GET blobs/sha256:...").
func watchStall(parent context.Context, timeout time.Duration, what string) *stallWatch {
	ctx, cancel := context.WithCancelCause(parent)
	w := &stallWatch{ctx: ctx, cancel: cancel, timeout: timeout}
	if timeout > 0 {
		w.timer = time.AfterFunc(timeout, func() { cancel(&stalledError{what: what, timeout: timeout}) })
	}
	return w
}

func (w *stallWatch) progress() {
	if w.timer != nil {
		w.timer.Reset(w.timeout)
	}
}

// explain replaces the error of a request the watch ended (a cancelled
// context, as the HTTP client sees it) with the reason.
func (w *stallWatch) explain(err error) error {
	var stalled *stalledError
	if err != nil && !errors.Is(err, io.EOF) && errors.As(context.Cause(w.ctx), &stalled) {
		return stalled
	}
	return err
}

func (w *stallWatch) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
	w.cancel(nil)
}

// watchedBody is a response body under its request's watch; closing it
// ends the watch.
type watchedBody struct {
	body  io.ReadCloser
	watch *stallWatch
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if n > 0 {
		b.watch.progress()
	}
	return n, b.watch.explain(err)
}

func (b *watchedBody) Close() error {
	b.watch.stop()
	return b.body.Close()
}
