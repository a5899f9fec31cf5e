package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/evjournal/containerd/integration/fixture"
)

// TestMetricsExposition: after a container's life, the daemon's
// --metrics-address parses as the Prometheus text format, every family it
// serves is described and named in docs/metrics.md, and the figures tell
// what happened.
func TestMetricsExposition(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	d := startDaemon(t, "--metrics-address", addr)
	id := fixture.UniqueID(t)
	evs, _ := startAndWait(t, d, id, fixture.NewBundle(t))
	addProcess(t, d, execReq(id, "e1", "exit", "7"))
	evs.Expect("start-process "+id+" e1", "exit "+id+" e1 7")
	signal(t, d, id, "init", syscall.SIGKILL)
	evs.Expect("exit " + id + " init 137")

	fams := scrapeMetrics(t, addr)
	doc, err := os.ReadFile(filepath.Join(fixture.RepoRoot(), "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range fams {
		if strings.Contains(f.GetHelp(), "not described") || !strings.Contains(string(doc), "`"+name) {
			t.Errorf("family %s (%q) is not described in docs/metrics.md", name, f.GetHelp())
		}
	}
	atLeast(t, fams, "containerd_events_total", 4) // start-container, start-process, two exits
	atLeast(t, fams, "containerd_tasks_by_kind_total", 2)
	atLeast(t, fams, "containerd_goroutines", 1)
	if s := fams["containerd_container_start_duration_seconds"].GetMetric(); len(s) != 1 || s[0].GetSummary().GetSampleCount() != 1 || s[0].GetSummary().GetSampleSum() <= 0 {
		t.Errorf("container start summary %v, want one start of some duration", s)
	}
}

// scrapeMetrics fetches /metrics as a Prometheus server would and parses it
// with Prometheus' own text parser.
func scrapeMetrics(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), "GET", "http://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("Content-Type %q, want the text format 0.0.4", ct)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("the exposition does not parse: %v", err)
	}
	return fams
}

// atLeast checks that the samples of a counter or gauge family add up to
// at least min.
func atLeast(t *testing.T, fams map[string]*dto.MetricFamily, name string, min float64) {
	t.Helper()
	var sum float64
	for _, m := range fams[name].GetMetric() {
		sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	if sum < min {
		t.Errorf("%s = %v, want at least %v", name, sum, min)
	}
}
