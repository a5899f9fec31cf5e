package main

import (
	"context"
	"net/http"
	"os"
	"os/signal"
	goruntime "runtime"
	"syscall"
	"time"

	metrics "github.com/rcrowley/go-metrics"
	"github.com/sirupsen/logrus"
)

// handleSignals returns the channel of stop signals (SIGINT, SIGTERM).
// SIGUSR1 dumps goroutine stacks to the log. SIGPIPE is caught and dropped,
// so a write to a closed stdout or stderr fails instead of killing the
// daemon (docs/api.md 9.4); catching it rather than ignoring
// it keeps the default disposition for the shims and containers we exec.
func handleSignals(log *logrus.Entry) <-chan os.Signal {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	other := make(chan os.Signal, 8)
	signal.Notify(other, syscall.SIGUSR1, syscall.SIGPIPE)
	go func() {
		for sig := range other {
			if sig == syscall.SIGUSR1 {
				dumpStacks(log)
			}
		}
	}()
	return stop
}

// processSampleInterval is how often the process gauges are refreshed.
const processSampleInterval = 30 * time.Second

// sampleProcess keeps the v0.2.9 process gauges (goroutines, fds,
// memory-used) up to date until ctx ends. A name already registered by
// another component as something else is left alone.
func sampleProcess(ctx context.Context, r metrics.Registry) {
	gauges := map[string]func() int64{
		"goroutines":  func() int64 { return int64(goruntime.NumGoroutine()) },
		"fds":         countFDs,
		"memory-used": func() int64 { var m goruntime.MemStats; goruntime.ReadMemStats(&m); return int64(m.Sys) },
	}
	own := map[string]metrics.Gauge{}
	for name := range gauges {
		if g, ok := r.GetOrRegister(name, metrics.NewGauge).(metrics.Gauge); ok {
			if _, functional := g.(metrics.FunctionalGauge); !functional {
				own[name] = g
			}
		}
	}
	t := time.NewTicker(processSampleInterval)
	defer t.Stop()
	for {
		for name, g := range own {
			g.Update(gauges[name]())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func countFDs() int64 {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return int64(len(ents))
}

// metricsMux serves the registry at /metrics.
func metricsMux(r metrics.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metricsHandler(r))
	return mux
}
