package main

import (
	"context"
	"sort"
	"time"

	metrics "github.com/rcrowley/go-metrics"
	"github.com/sirupsen/logrus"
)

// quantiles reported for timers and histograms.
var quantiles = []float64{0.5, 0.9, 0.99}

// logMetrics logs every metric of r every interval until ctx ends. Unlike
// v0.2.9 it runs whatever the log level (docs/api.md 9.5).
func logMetrics(ctx context.Context, r metrics.Registry, interval time.Duration, log *logrus.Entry) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			eachMetric(r, func(name string, m any) {
				if f := metricFields(m); f != nil {
					log.WithField("metric", name).WithFields(f).Info("metrics")
				}
			})
		}
	}
}

// eachMetric calls f for every metric of r, sorted by name.
func eachMetric(r metrics.Registry, f func(name string, m any)) {
	all := map[string]any{}
	r.Each(func(name string, m any) { all[name] = m })
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f(n, all[n])
	}
}

// metricFields returns a metric's values as log fields (nil: not reported).
func metricFields(m any) logrus.Fields {
	switch m := m.(type) {
	case metrics.Counter:
		return logrus.Fields{"count": m.Count()}
	case metrics.Gauge:
		return logrus.Fields{"value": m.Value()}
	case metrics.GaugeFloat64:
		return logrus.Fields{"value": m.Value()}
	case metrics.Meter:
		s := m.Snapshot()
		return logrus.Fields{"count": s.Count(), "rate1": s.Rate1()}
	case metrics.Timer:
		s := m.Snapshot()
		ps := s.Percentiles(quantiles)
		return logrus.Fields{"count": s.Count(), "mean": time.Duration(s.Mean()).String(),
			"p50": time.Duration(ps[0]).String(), "p99": time.Duration(ps[2]).String(), "max": time.Duration(s.Max()).String()}
	case metrics.Histogram:
		s := m.Snapshot()
		ps := s.Percentiles(quantiles)
		return logrus.Fields{"count": s.Count(), "mean": s.Mean(), "p50": ps[0], "p99": ps[2], "max": s.Max()}
	}
	return nil
}
