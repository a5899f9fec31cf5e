package supervisor

import metrics "github.com/rcrowley/go-metrics"

// supMetrics are the supervisor's go-metrics, registered under the names of
// v0.2.9 where one existed so dashboards carry over.
type supMetrics struct {
	reg              metrics.Registry
	containers       metrics.Gauge
	subscribers      metrics.Gauge
	epollFds         metrics.Gauge
	events           metrics.Counter
	lagged           metrics.Counter
	retries          metrics.Counter
	journalErrors    metrics.Counter
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
		epollFds:         metrics.GetOrRegisterGauge("epoll-fds", r),
		events:           metrics.GetOrRegisterCounter("events", r),
		lagged:           metrics.GetOrRegisterCounter("lagged-subscribers", r),
		retries:          metrics.GetOrRegisterCounter("work-retries", r),
		journalErrors:    metrics.GetOrRegisterCounter("journal-errors", r),
		taskLatency:      metrics.GetOrRegisterTimer("task-latency", r),
		journalAppend:    metrics.GetOrRegisterTimer("journal-append-time", r),
		journalSync:      metrics.GetOrRegisterTimer("journal-sync-time", r),
		startTime:        metrics.GetOrRegisterTimer("container-start-time", r),
		execTime:         metrics.GetOrRegisterTimer("exec-process-time", r),
		exitTime:         metrics.GetOrRegisterTimer("exit-process-time", r),
		deleteTime:       metrics.GetOrRegisterTimer("container-delete-time", r),
		restoreContainer: metrics.GetOrRegisterCounter("restored-containers", r),
		setAside:         metrics.GetOrRegisterCounter("containers-set-aside", r),
		tasks:            metrics.GetOrRegisterCounter("tasks", r),
		tasksByKind:      map[string]metrics.Counter{},
	}
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
