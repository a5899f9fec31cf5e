package supervisor

import (
	"sync"

	metrics "github.com/rcrowley/go-metrics"
)

// supMetrics are the supervisor's go-metrics, registered under the names of
// v0.2.9 where one existed so dashboards carry over.
type supMetrics struct {
	reg              metrics.Registry
	containers       metrics.Gauge
	subscribers      metrics.Gauge
	events           metrics.Counter
	lagged           metrics.Counter
	retries          metrics.Counter
	refused          metrics.Counter // requests refused with ResourceExhausted (queue bounds)
	journalErrors    metrics.Counter
	degraded         metrics.Gauge // 1 while the journal cannot write
	held             metrics.Gauge // events waiting for the journal
	taskLatency      metrics.Timer
	journalAppend    metrics.Timer
	journalSync      metrics.Timer
	startTime        metrics.Timer
	execTime         metrics.Timer
	exitTime         metrics.Timer
	deleteTime       metrics.Timer
	restoreContainer metrics.Counter
	setAside         metrics.Counter
	tasks            metrics.Counter
	tasksByKind      map[string]metrics.Counter // owned by the loop
}

func newMetrics(r metrics.Registry) *supMetrics {
	return &supMetrics{
		reg:              r,
		containers:       metrics.GetOrRegisterGauge("containers", r),
		subscribers:      metrics.GetOrRegisterGauge("event-subscribers", r),
		events:           metrics.GetOrRegisterCounter("events", r),
		lagged:           metrics.GetOrRegisterCounter("lagged-subscribers", r),
		retries:          metrics.GetOrRegisterCounter("work-retries", r),
		refused:          metrics.GetOrRegisterCounter("requests-refused-busy", r),
		journalErrors:    metrics.GetOrRegisterCounter("journal-errors", r),
		degraded:         metrics.GetOrRegisterGauge("journal-degraded", r),
		held:             metrics.GetOrRegisterGauge("journal-held-events", r),
		taskLatency:      registerTimer("task-latency", r),
		journalAppend:    registerTimer("journal-append-time", r),
		journalSync:      registerTimer("journal-sync-time", r),
		startTime:        registerTimer("container-start-time", r),
		execTime:         registerTimer("exec-process-time", r),
		exitTime:         registerTimer("exit-process-time", r),
		deleteTime:       registerTimer("container-delete-time", r),
		restoreContainer: metrics.GetOrRegisterCounter("restored-containers", r),
		setAside:         metrics.GetOrRegisterCounter("containers-set-aside", r),
		tasks:            metrics.GetOrRegisterCounter("tasks", r),
		tasksByKind:      map[string]metrics.Counter{},
	}
}

// watchMonitor makes the "epoll-fds" gauge read the monitor's count of
// registered sources when it is sampled, so it is never stale.
func (m *supMetrics) watchMonitor(mon interface{ Count() int }) {
	m.reg.GetOrRegister("epoll-fds", metrics.NewFunctionalGauge(func() int64 { return int64(mon.Count()) }))
}

// task counts one task of the given kind ("tasks.create", ...). It runs on
// the loop, so the counter is looked up in the registry once per kind.
func (m *supMetrics) task(kind string) {
	c, ok := m.tasksByKind[kind]
	if !ok {
		c = metrics.GetOrRegisterCounter("tasks."+kind, m.reg)
		m.tasksByKind[kind] = c
	}
	c.Inc(1)
	m.tasks.Inc(1)
}

// registerTimer registers a timer whose Sum is over its whole life, like its
// Count: go-metrics sums only the decaying sample, which would make the
// Prometheus summary's _sum go down (docs/metrics.md). Snapshots, and so the
// quantiles and the log lines, still come from the decaying sample.
func registerTimer(name string, r metrics.Registry) metrics.Timer {
	t, ok := r.GetOrRegister(name, func() metrics.Timer {
		return metrics.NewCustomTimer(metrics.NewHistogram(&lifetimeSum{Sample: metrics.NewExpDecaySample(1028, 0.015)}), metrics.NewMeter())
	}).(metrics.Timer)
	if !ok {
		return metrics.NilTimer{} // the name is taken by another kind; drop the figures
	}
	return t
}

// lifetimeSum is a go-metrics sample that also keeps the sum of every value
// it was given.
type lifetimeSum struct {
	metrics.Sample
	mu  sync.Mutex // orders Update against Count and Sum
	sum int64
}

func (s *lifetimeSum) Update(v int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Sample.Update(v)
	s.sum += v
}

// Count is the number of values since the sample was made.
func (s *lifetimeSum) Count() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Sample.Count()
}

// Sum is the sum of every value since the sample was made.
func (s *lifetimeSum) Sum() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sum
}
