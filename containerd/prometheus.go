package main

import (
	"math"
	"net/http"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	metrics "github.com/rcrowley/go-metrics"
	"google.golang.org/protobuf/proto"
)

// promDesc says how one go-metrics entry is exposed: its Prometheus family
// name (unit and "_total" included) and its HELP text. docs/metrics.md
// lists the same families.
type promDesc struct {
	name, help string
}

// promDescs describes every metric the daemon registers, by its go-metrics
// name (kept from v0.2, and used in the log lines of --metrics-interval).
var promDescs = map[string]promDesc{
	"containers":            {"containerd_containers", "Containers the daemon supervises now."},
	"event-subscribers":     {"containerd_event_subscribers", "Clients following the live event stream now."},
	"epoll-fds":             {"containerd_epoll_fds", "Sources in the monitor's epoll set now: exit FIFOs and OOM watches."},
	"events":                {"containerd_events_total", "Events journaled and published."},
	"lagged-subscribers":    {"containerd_lagged_subscribers_total", "Subscribers cut off because they fell too far behind."},
	"work-retries":          {"containerd_work_retries_total", "Retries of per-container work (exit handling) after a failure."},
	"requests-refused-busy": {"containerd_requests_refused_busy_total", "Requests refused with ResourceExhausted because the daemon's work or read queue was full."},
	"journal-errors":        {"containerd_journal_errors_total", "Journal appends, commits and retries of held events that failed."},
	"journal-degraded":      {"containerd_journal_degraded", "1 while the journal cannot write (disk full, EIO...): events are held, requests that create events refused."},
	"journal-held-events":   {"containerd_journal_held_events", "Events waiting in memory for the journal to write again."},
	"task-latency":          {"containerd_task_latency_seconds", "Time from an API request's task being sent to the loop until its reply."},
	"journal-append-time":   {"containerd_journal_append_duration_seconds", "Time to append one event to the journal."},
	"journal-sync-time":     {"containerd_journal_sync_duration_seconds", "Time to commit the journal (fsync as --journal-sync says) before a batch of events is published."},
	"container-start-time":  {"containerd_container_start_duration_seconds", "Time to create and start a container (shim spawn, runc create and start), queue wait included."},
	"exec-process-time":     {"containerd_exec_process_duration_seconds", "Time to start an exec'd process, queue wait included."},
	"exit-process-time":     {"containerd_exit_process_duration_seconds", "Time from the monitor's report of an exit until the loop records it, queue wait included."},
	"container-delete-time": {"containerd_container_delete_duration_seconds", "Time of the delete step after an init's exit (runc delete, state dir removal)."},
	"restored-containers":   {"containerd_restored_containers_total", "Containers reattached when the daemon started."},
	"containers-set-aside":  {"containerd_containers_set_aside_total", "State dirs moved to .aside/ because they could not be loaded."},
	"tasks":                 {"containerd_tasks_total", "Tasks handled by the supervisor loop, all kinds."},
	"goroutines":            {"containerd_goroutines", "Goroutines of the daemon (sampled every 30 s)."},
	"fds":                   {"containerd_open_fds", "Open file descriptors of the daemon (sampled every 30 s)."},
	"memory-used":           {"containerd_memory_used_bytes", "Memory the Go runtime obtained from the OS (sampled every 30 s)."},
}

// taskKindPrefix starts the per-kind task counters ("tasks.create", ...),
// exposed as one family with a "kind" label.
const taskKindPrefix = "tasks."

var tasksByKind = promDesc{"containerd_tasks_by_kind_total", "Tasks handled by the supervisor loop, by kind."}

// metricsHandler serves r in the Prometheus exposition format the scraper
// asks for (text 0.0.4 by default, or protobuf), encoded by expfmt.
func metricsHandler(r metrics.Registry) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		format := expfmt.NegotiateAccept(req.Header, expfmt.DefaultAcceptedFormats()...)
		w.Header().Set("Content-Type", string(format))
		enc := expfmt.NewEncoder(w, format)
		for _, f := range promFamilies(r) {
			if err := enc.Encode(f); err != nil {
				return // the scraper went away; nothing to tell it
			}
		}
	})
}

// promFamilies converts every metric of r into Prometheus metric families,
// sorted by name.
func promFamilies(r metrics.Registry) []*dto.MetricFamily {
	byName := map[string]*dto.MetricFamily{}
	eachMetric(r, func(name string, m any) {
		metric, typ, ok := promMetric(m)
		if !ok {
			return
		}
		desc, labels := describe(name, typ)
		metric.Label = labels
		f := byName[desc.name]
		if f == nil {
			f = &dto.MetricFamily{Name: proto.String(desc.name), Help: proto.String(desc.help), Type: typ.Enum()}
			byName[desc.name] = f
		}
		if f.GetType() == typ {
			f.Metric = append(f.Metric, metric)
		}
	})
	out := make([]*dto.MetricFamily, 0, len(byName))
	for _, f := range byName {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out
}

// describe returns the family of a go-metrics name and its labels. A name
// promDescs lacks still gets a valid family, named after it.
func describe(name string, typ dto.MetricType) (promDesc, []*dto.LabelPair) {
	if d, ok := promDescs[name]; ok {
		return d, nil
	}
	if kind, ok := strings.CutPrefix(name, taskKindPrefix); ok {
		return tasksByKind, []*dto.LabelPair{{Name: proto.String("kind"), Value: proto.String(kind)}}
	}
	n := promName(name)
	switch typ {
	case dto.MetricType_COUNTER:
		n += "_total"
	case dto.MetricType_SUMMARY:
		n += "_seconds"
	}
	return promDesc{n, "go-metrics " + name + " (not described in docs/metrics.md)."}, nil
}

// promMetric converts one go-metrics value of the kinds the daemon
// registers. Counters are counters: the daemon only ever increments them.
// Timers are summaries in seconds; their quantiles are over go-metrics'
// decaying sample (about the last 5 minutes).
func promMetric(m any) (*dto.Metric, dto.MetricType, bool) {
	switch m := m.(type) {
	case metrics.Counter:
		return &dto.Metric{Counter: &dto.Counter{Value: proto.Float64(float64(m.Count()))}}, dto.MetricType_COUNTER, true
	case metrics.Gauge:
		return &dto.Metric{Gauge: &dto.Gauge{Value: proto.Float64(float64(m.Value()))}}, dto.MetricType_GAUGE, true
	case metrics.Timer:
		// Count and Sum from the timer itself: the supervisor's timers sum
		// over their whole life there, their snapshots only over the sample.
		ps := m.Snapshot().Percentiles(quantiles)
		return &dto.Metric{Summary: summary(m.Count(), float64(m.Sum()), ps, 1/float64(time.Second))}, dto.MetricType_SUMMARY, true
	}
	return nil, 0, false
}

// summary builds a summary whose sum and quantiles are scaled by unit. With
// no observation its quantiles are NaN, as Prometheus clients write them
// (go-metrics says 0, which would read as a real figure).
func summary(count int64, sum float64, ps []float64, unit float64) *dto.Summary {
	s := &dto.Summary{SampleCount: proto.Uint64(uint64(count)), SampleSum: proto.Float64(sum * unit)}
	for i, q := range quantiles {
		v := ps[i] * unit
		if count == 0 {
			v = math.NaN()
		}
		s.Quantile = append(s.Quantile, &dto.Quantile{Quantile: proto.Float64(q), Value: proto.Float64(v)})
	}
	return s
}

// promName turns a go-metrics name such as "container-create-time" into
// "containerd_container_create_time".
func promName(name string) string {
	var b strings.Builder
	b.WriteString("containerd_")
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}
