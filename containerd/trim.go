package main

import (
	"context"
	"runtime/debug"
	"time"

	metrics "github.com/rcrowley/go-metrics"
	"github.com/sirupsen/logrus"

	"github.com/evjournal/containerd/internal/gcfloor"
	"github.com/evjournal/containerd/internal/memtrim"
)

// idleTrimAfter is how long the supervisor must have handled no task before
// the daemon trims its memory again (see trimWhenIdle).
const idleTrimAfter = 500 * time.Millisecond

// trimWhenIdle returns what a burst of work alone needed once the daemon is
// idle again: right after the start (the restore), then each time the
// supervisor has handled no task for idleTrimAfter after handling some. It
// returns the heap's free memory to the OS and releases the mappings of the
// binary's pages the burst touched (internal/memtrim): an idle daemon keeps
// resident what it runs while idle, not its whole 15 MB binary. A trim
// costs about a millisecond; the pages the next request runs fault back
// in (a minor fault per 64 KiB).
//
// The GC tuner's burst headroom (internal/gcfloor) is paused before each
// trim and resumed when work comes back.
func trimWhenIdle(ctx context.Context, r metrics.Registry, log *logrus.Entry, gc *gcfloor.Tuner) {
	tasks := metrics.GetOrRegisterCounter("tasks", r)
	t := time.NewTicker(idleTrimAfter)
	defer t.Stop()
	// Activity is a task handled or a GC cycle run (a collection scans
	// every stack, which reads the pclntab: it maps megabytes of the binary
	// back); the trim's own collection is not activity.
	activity := func() int64 { return tasks.Count() + int64(gcfloor.Cycles()) }
	last, dirty := activity(), true
	for {
		if n := activity(); n != last {
			if !dirty {
				gc.Resume()
			}
			last, dirty = n, true
		} else if dirty {
			gc.Pause()
			trim(log)
			gc.ResumeOnNextCycle() // the first collection of the next burst, not the next tick
			last, dirty = activity(), false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func trim(log *logrus.Entry) {
	debug.FreeOSMemory()
	if n, err := memtrim.ReleaseText(); err != nil {
		log.WithError(err).Debug("memtrim: the binary's mappings are kept")
	} else {
		log.WithField("bytes", n).Debug("memtrim: the binary's read-only mappings released")
	}
}
