package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	metrics "github.com/rcrowley/go-metrics"
	"github.com/sirupsen/logrus"
)

// quantiles reported for timers and histograms.
var quantiles = []float64{0.5, 0.9, 0.99}

// logMetrics logs every metric of r every interval until ctx ends. Unlike
// v0.2.9 it runs whatever the log level (compat doc section 9, item 41).
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

// metricsHandler serves r in the Prometheus text exposition format (0.0.4).
func metricsHandler(r metrics.Registry) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		writePrometheus(w, r)
	})
}

// writePrometheus writes every metric of r. Names get the prefix
// "containerd_" and have characters Prometheus does not allow replaced by
// "_". Counters (which go-metrics lets go down) and gauges are gauges,
// meters are counters, timers are summaries in seconds, histograms are
// summaries.
func writePrometheus(w io.Writer, r metrics.Registry) {
	eachMetric(r, func(name string, m any) {
		n := promName(name)
		switch m := m.(type) {
		case metrics.Counter:
			promValue(w, n, "gauge", float64(m.Count()))
		case metrics.Gauge:
			promValue(w, n, "gauge", float64(m.Value()))
		case metrics.GaugeFloat64:
			promValue(w, n, "gauge", m.Value())
		case metrics.Meter:
			promValue(w, n+"_total", "counter", float64(m.Snapshot().Count()))
		case metrics.Timer:
			s := m.Snapshot()
			promSummary(w, n+"_seconds", s.Count(), float64(s.Sum())/1e9, scale(s.Percentiles(quantiles), 1e-9))
		case metrics.Histogram:
			s := m.Snapshot()
			promSummary(w, n, s.Count(), float64(s.Sum()), s.Percentiles(quantiles))
		}
	})
}

func promValue(w io.Writer, name, typ string, v float64) {
	fmt.Fprintf(w, "# TYPE %s %s\n%s %v\n", name, typ, name, v)
}

func promSummary(w io.Writer, name string, count int64, sum float64, ps []float64) {
	fmt.Fprintf(w, "# TYPE %s summary\n", name)
	for i, q := range quantiles {
		fmt.Fprintf(w, "%s{quantile=\"%v\"} %v\n", name, q, ps[i])
	}
	fmt.Fprintf(w, "%s_sum %v\n%s_count %d\n", name, sum, name, count)
}

func scale(vs []float64, f float64) []float64 {
	out := make([]float64, len(vs))
	for i, v := range vs {
		out[i] = v * f
	}
	return out
}

// promName turns a go-metrics name such as "container-create-time" into
// "containerd_container_create_time".
func promName(name string) string {
	var b strings.Builder
	b.WriteString("containerd_")
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == ':':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}
