package main

import (
	"math"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metrics "github.com/rcrowley/go-metrics"
)

// scrape serves r through metricsHandler as a scraper asking for the text
// format would see it, and parses the answer with Prometheus' own parser
// (legacy names: what every Prometheus version accepts).
func scrape(t *testing.T, r metrics.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Header.Set("Accept", "text/plain")
	metricsHandler(r).ServeHTTP(rec, req)
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("Content-Type %q, want the text format 0.0.4", ct)
	}
	body := rec.Body.String()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("exposition does not parse: %v\n%s", err, body)
	}
	for _, line := range []string{"# HELP containerd_events_total Events journaled and published.\n", "# TYPE containerd_events_total counter\n"} {
		if !strings.Contains(body, line) {
			t.Errorf("exposition lacks %q:\n%s", line, body)
		}
	}
	return fams
}

// TestExposition: each kind of metric comes out as the family docs/metrics.md
// names, with its type, unit, HELP and value.
func TestExposition(t *testing.T) {
	r := metrics.NewRegistry()
	metrics.GetOrRegisterCounter("events", r).Inc(3)
	metrics.GetOrRegisterGauge("containers", r).Update(2)
	metrics.GetOrRegisterGauge("memory-used", r).Update(1 << 20)
	tm := metrics.GetOrRegisterTimer("container-start-time", r)
	tm.Update(2 * time.Second)
	tm.Update(4 * time.Second)
	metrics.GetOrRegisterCounter("tasks.create", r).Inc(2)
	metrics.GetOrRegisterCounter("tasks.state", r).Inc(5)
	metrics.GetOrRegisterCounter("brand-new", r).Inc(1)
	metrics.GetOrRegisterTimer("exec-process-time", r)
	fams := scrape(t, r)

	wantValue(t, fams, "containerd_events_total", dto.MetricType_COUNTER, "", 3)
	wantValue(t, fams, "containerd_containers", dto.MetricType_GAUGE, "", 2)
	wantValue(t, fams, "containerd_memory_used_bytes", dto.MetricType_GAUGE, "", 1<<20)
	wantValue(t, fams, "containerd_tasks_by_kind_total", dto.MetricType_COUNTER, "create", 2)
	wantValue(t, fams, "containerd_tasks_by_kind_total", dto.MetricType_COUNTER, "state", 5)
	wantValue(t, fams, "containerd_brand_new_total", dto.MetricType_COUNTER, "", 1)

	s := family(t, fams, "containerd_container_start_duration_seconds", dto.MetricType_SUMMARY).Metric[0].GetSummary()
	if s.GetSampleCount() != 2 || s.GetSampleSum() != 6 {
		t.Errorf("start summary count %d sum %v, want 2 and 6 (seconds)", s.GetSampleCount(), s.GetSampleSum())
	}
	if q := s.GetQuantile(); len(q) != 3 || q[0].GetQuantile() != 0.5 || q[0].GetValue() != 3 || q[2].GetQuantile() != 0.99 {
		t.Errorf("start summary quantiles %v, want 0.5=3s, 0.9, 0.99", q)
	}
	idle := family(t, fams, "containerd_exec_process_duration_seconds", dto.MetricType_SUMMARY).Metric[0].GetSummary()
	if idle.GetSampleCount() != 0 || !math.IsNaN(idle.GetQuantile()[0].GetValue()) {
		t.Errorf("summary without observations: %v, want count 0 and NaN quantiles", idle)
	}
	if len(fams) != 7 {
		t.Errorf("%d families, want 7 (the two task kinds share one)", len(fams))
	}
}

// TestDescribedNames: every described family follows Prometheus naming:
// counters end in _total, durations in _seconds, the memory gauge in _bytes,
// and no two go-metrics names share a family.
func TestDescribedNames(t *testing.T) {
	seen := map[string]string{tasksByKind.name: taskKindPrefix}
	for metric, d := range promDescs {
		if prev, dup := seen[d.name]; dup {
			t.Errorf("%s and %s both map to %s", metric, prev, d.name)
		}
		seen[d.name] = metric
		if !model.LegacyValidation.IsValidMetricName(d.name) || !strings.HasPrefix(d.name, "containerd_") || !strings.HasSuffix(d.help, ".") {
			t.Errorf("%s: family %q, help %q", metric, d.name, d.help)
		}
		if strings.HasSuffix(metric, "-time") != strings.HasSuffix(d.name, "_duration_seconds") {
			t.Errorf("%s: a duration must end in _duration_seconds, got %s", metric, d.name)
		}
	}
}

func family(t *testing.T, fams map[string]*dto.MetricFamily, name string, typ dto.MetricType) *dto.MetricFamily {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("no family %s", name)
	}
	if f.GetType() != typ || f.GetHelp() == "" {
		t.Fatalf("%s: type %v help %q, want %v with a HELP", name, f.GetType(), f.GetHelp(), typ)
	}
	return f
}

// wantValue checks the sample of family name whose "kind" label is kind
// ("" = no label).
func wantValue(t *testing.T, fams map[string]*dto.MetricFamily, name string, typ dto.MetricType, kind string, want float64) {
	t.Helper()
	for _, m := range family(t, fams, name, typ).Metric {
		var got string
		for _, l := range m.Label {
			if l.GetName() == "kind" {
				got = l.GetValue()
			}
		}
		if got != kind {
			continue
		}
		if v := m.GetCounter().GetValue() + m.GetGauge().GetValue(); v != want {
			t.Errorf("%s{kind=%q} = %v, want %v", name, kind, v, want)
		}
		return
	}
	t.Errorf("%s: no sample with kind %q", name, kind)
}
