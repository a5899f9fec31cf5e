package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
)

// undoList is the cleanup of a setup cut short: each step is registered
// before the step it undoes, and they run in reverse order with a context
// of their own, so that a request whose context ended (a cancelled
// RunPodSandbox) still frees its netns, IP lease, mounts and processes.
type undoList struct {
	steps []undoStep
}

type undoStep struct {
	what string
	f    func(ctx context.Context) error
	// unlessFailed: skipped once a step run before it failed.
	unlessFailed bool
}

// undoTimeout bounds the whole cleanup.
const undoTimeout = time.Minute

func (u *undoList) add(what string, f func(ctx context.Context) error) {
	u.steps = append(u.steps, undoStep{what: what, f: f})
}

// addUnlessFailed registers a step that removes what the next start
// needs to finish a cleanup that failed (a pod's dir, whose record names
// its netns and IP lease): it runs only when every step before it did.
func (u *undoList) addUnlessFailed(what string, f func(ctx context.Context) error) {
	u.steps = append(u.steps, undoStep{what: what, f: f, unlessFailed: true})
}

// run runs the steps, newest first, every one even when some fail (but
// those added unlessFailed); the failures are logged and returned together.
func (u *undoList) run(log *logrus.Entry) error {
	ctx, cancel := context.WithTimeout(context.Background(), undoTimeout)
	defer cancel()
	var errs []error
	for i := len(u.steps) - 1; i >= 0; i-- {
		st := u.steps[i]
		if st.unlessFailed && len(errs) > 0 {
			log.Warn("cri: cleanup after a failed setup: left for the next start: " + st.what)
			continue
		}
		if err := st.f(ctx); err != nil {
			log.WithError(err).Error("cri: cleanup after a failed setup: " + st.what)
			errs = append(errs, fmt.Errorf("%s: %w", st.what, err))
		}
	}
	u.steps = nil
	return errors.Join(errs...)
}
