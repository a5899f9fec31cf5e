package main

import (
	"testing"
	"time"

	metrics "github.com/rcrowley/go-metrics"
)

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
