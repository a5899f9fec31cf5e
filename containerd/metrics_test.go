package main

import (
	"strings"
	"testing"
	"time"

	metrics "github.com/rcrowley/go-metrics"
)

func TestWritePrometheus(t *testing.T) {
	r := metrics.NewRegistry()
	metrics.GetOrRegisterCounter("tasks", r).Inc(3)
	metrics.GetOrRegisterGauge("containers", r).Update(2)
	metrics.GetOrRegisterGaugeFloat64("load", r).Update(0.5)
	tm := metrics.GetOrRegisterTimer("container-start-time", r)
	tm.Update(2 * time.Second)
	tm.Update(4 * time.Second)
	metrics.GetOrRegisterMeter("events.rate", r).Mark(5)
	metrics.GetOrRegisterHistogram("sizes", r, metrics.NewUniformSample(10)).Update(7)

	var b strings.Builder
	writePrometheus(&b, r)
	out := b.String()
	for _, want := range []string{
		"# TYPE containerd_tasks gauge\ncontainerd_tasks 3\n",
		"# TYPE containerd_containers gauge\ncontainerd_containers 2\n",
		"containerd_load 0.5\n",
		"# TYPE containerd_container_start_time_seconds summary\n",
		"containerd_container_start_time_seconds_sum 6\n",
		"containerd_container_start_time_seconds_count 2\n",
		`containerd_container_start_time_seconds{quantile="0.5"} 3` + "\n",
		"# TYPE containerd_events_rate_total counter\ncontainerd_events_rate_total 5\n",
		"containerd_sizes_count 1\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}

func TestMetricFields(t *testing.T) {
	r := metrics.NewRegistry()
	metrics.GetOrRegisterTimer("t", r).Update(time.Millisecond)
	f := metricFields(r.Get("t"))
	if f["count"] != int64(1) || f["p50"] != "1ms" {
		t.Fatalf("fields %v", f)
	}
	if metricFields(struct{}{}) != nil {
		t.Fatal("unknown metric kinds are skipped")
	}
}

func TestPromName(t *testing.T) {
	for in, want := range map[string]string{
		"container-create-time": "containerd_container_create_time",
		"tasks.create":          "containerd_tasks_create",
		"époll fds":             "containerd__poll_fds",
	} {
		if got := promName(in); got != want {
			t.Errorf("promName(%q) = %q, want %q", in, got, want)
		}
	}
}
