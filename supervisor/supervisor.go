// Package supervisor owns the one authoritative view of every container.
//
// A single goroutine, the loop, owns all container state: the map of
// containers, the subscribers and the per-container work queues. Nothing
// else reads or writes them. Requests and the results of slow work (runc,
// shims) enter the loop as tasks; slow work itself runs on a bounded worker
// pool, so the loop never blocks on runc, a full channel or a client.
//
// Every event is appended to the journal first; once the loop's batch is
// committed (group commit) the events are published and the replies that
// depend on them are sent.
package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	metrics "github.com/rcrowley/go-metrics"
	"github.com/sirupsen/logrus"

	"github.com/evjournal/containerd/monitor"
	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/supervisor/journal"
	"github.com/evjournal/containerd/supervisor/objects"
)

// Config is the supervisor's configuration; zero values get defaults.
type Config struct {
	StateDir string
	// JournalDir holds the event journal (default StateDir). When it is
	// another directory, a v0.2 events.log found in StateDir is imported
	// into it once.
	JournalDir   string
	Runtime      string
	RuntimeArgs  []string
	Shim         string
	StartTimeout time.Duration
	RetainCount  int
	SyncPolicy   journal.SyncPolicy
	// ObjectsDir holds the snapshot of the CRI objects (cri-objects.json;
	// default JournalDir): the daemon puts it beside the CRI records.
	ObjectsDir string
	// ReconcileInterval is how often the loop's view is compared with the
	// processes' real state (0 = 10 s, negative = never).
	ReconcileInterval time.Duration
	// ExecGrace bounds how long an init's exit waits for its execs' exits.
	ExecGrace time.Duration
	// AsideKeep is how many set-aside state dirs (StateDir/.aside) restore
	// keeps, the newest (0 = DefaultAsideKeep, negative = all).
	AsideKeep        int
	Workers          int
	SubscriberBuffer int
	Logger           *logrus.Entry
	Metrics          metrics.Registry

	// For tests: a fake runtime, monitor and clock.
	RuntimeImpl Runtime
	MonitorImpl Monitor
	Clock       Clock
}

func (c *Config) setDefaults() {
	if c.JournalDir == "" {
		c.JournalDir = c.StateDir
	}
	if c.ObjectsDir == "" {
		c.ObjectsDir = c.JournalDir
	}
	if c.Runtime == "" {
		c.Runtime = "runc"
	}
	if c.Shim == "" {
		c.Shim = "containerd-shim"
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 30 * time.Second
	}
	if c.ReconcileInterval == 0 {
		c.ReconcileInterval = 10 * time.Second
	}
	if c.ExecGrace == 0 {
		c.ExecGrace = 10 * time.Second
	}
	if c.AsideKeep == 0 {
		c.AsideKeep = DefaultAsideKeep
	}
	if c.Workers <= 0 {
		c.Workers = 10
	}
	if c.SubscriberBuffer <= 0 {
		c.SubscriberBuffer = 1024
	}
	if c.Logger == nil {
		c.Logger = logrus.NewEntry(logrus.StandardLogger())
	}
	if c.Metrics == nil {
		c.Metrics = metrics.NewRegistry()
	}
	if c.RuntimeImpl == nil {
		c.RuntimeImpl = realRuntime{}
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
}

// Supervisor is the event loop and everything it owns.
type Supervisor struct {
	cfg     Config
	rt      Runtime
	mon     Monitor
	journal *journal.Journal
	// journalDir is where the journal lives, named in errors.
	journalDir string
	clock      Clock
	log        *logrus.Entry
	m          *supMetrics
	workers    *workerPool // runtime work: creates, execs, checkpoints, updates, deletes; made by New
	// exitLane reads exit statuses and retires state dirs, nothing else:
	// exits never wait behind the runtime work or the readers.
	exitLane exitLane
	// execLane runs exec starts (execStep): the execs of one container
	// start side by side, and a crowd of them never takes the work lane's
	// workers from creates and deletes.
	execLane *workerPool
	// readLane runs State's pid scans, Stats and reconcile: reads that must
	// delay neither exits nor the runtime work.
	readLane *workerPool

	tasks    chan task
	urgent   chan task // the exit lane's results: the loop runs them before other tasks
	stopCh   chan struct{}
	loopDone chan struct{} // closed when the loop ended, or by Stop when it never ran
	stopped  chan struct{} // closed when Stop has closed everything

	// Start and Stop may run on different goroutines (a stop signal arrives
	// during restore), so the lifecycle is guarded by lifeMu.
	lifeMu      sync.Mutex
	phase       phase              // guarded by lifeMu
	cancelStart context.CancelFunc // guarded by lifeMu: ends a restore in progress
	startDone   chan struct{}      // closed when Start returns

	// Owned by the loop.
	containers map[string]*entry        // live incarnations by id
	procs      map[Process]*entry       // every monitored process
	queues     map[string]*workQueue    // per-id ordered work, outlives the entry
	subs       map[*subscriber]struct{} // live subscribers
	outbox     []pending                // events appended, publications and replies waiting for the journal commit
	held       []pending                // while degraded: events not journaled yet, and what waits behind them
	heldEvents int                      // events in held
	heldRetry  time.Duration            // next delay before appending the held events again
	degraded   *JournalError            // why the journal cannot write; nil when it can
	pending    int                      // steps in the per-id queues, running or waiting (admit)
	stopping   bool
	crash      crashPoint // test-only failpoint, empty in the daemon (failpoint_off.go)
	// objects is the lifecycle of the CRI service's pods and containers
	// (cri.go); watches are the exit watches, by id and process id.
	objects *objects.Table
	watches map[string][]chan ExitStatus
	// snapshots writes the objects' snapshot; nil until the loop runs.
	snapshots *snapshotWriter
}

// task is a function run on the loop goroutine.
type task func(s *Supervisor)

// phase is where the supervisor is in its life: New, then Start (restore,
// then the loop), then Stop. A failed Start leaves it to Stop, never half
// running.
type phase int

const (
	phaseNew      phase = iota // made, not started
	phaseStarting              // Start is restoring
	phaseFailed                // Start failed: only Stop is left to do
	phaseRunning               // the loop runs
	phaseStopped               // Stop was called
)

// errStarted is Start called a second time (also after a failed one).
var errStarted = errors.New("supervisor: already started")

// New opens the journal and the monitor. Call Start to restore and run.
func New(cfg Config) (*Supervisor, error) {
	cfg.setDefaults()
	s := &Supervisor{
		cfg: cfg, rt: cfg.RuntimeImpl, clock: cfg.Clock, log: cfg.Logger,
		tasks: make(chan task, 2048), urgent: make(chan task, 1024),
		stopCh: make(chan struct{}), loopDone: make(chan struct{}),
		stopped: make(chan struct{}), startDone: make(chan struct{}),
		containers: map[string]*entry{}, procs: map[Process]*entry{},
		queues: map[string]*workQueue{}, subs: map[*subscriber]struct{}{},
		objects: objects.NewTable(), watches: map[string][]chan ExitStatus{},
	}
	s.m = newMetrics(cfg.Metrics)
	opts := journal.Options{RetainCount: cfg.RetainCount, Sync: cfg.SyncPolicy, Logger: cfg.Logger, HoldRetention: true}
	if cfg.JournalDir != cfg.StateDir {
		opts.Legacy = filepath.Join(cfg.StateDir, "events.log")
	}
	j, err := journal.Open(cfg.JournalDir, adjustJournalOptions(opts))
	if err != nil {
		return nil, fmt.Errorf("open event journal: %w", err)
	}
	s.journal = j
	s.journalDir = cfg.JournalDir
	if err := os.MkdirAll(cfg.ObjectsDir, 0o700); err != nil {
		j.Close()
		return nil, fmt.Errorf("the CRI objects' dir: %w", err)
	}
	s.mon = cfg.MonitorImpl
	if s.mon == nil {
		m, err := monitor.New(monitor.WithLogger(cfg.Logger))
		if err != nil {
			j.Close()
			return nil, fmt.Errorf("start exit monitor: %w", err)
		}
		s.mon = m
	}
	s.m.watchMonitor(s.mon)
	s.workers = newWorkerPool(cfg.Workers) // made here: restore, the loop and Stop all use it
	s.exitLane = newExitLane()
	s.execLane = newWorkerPool(execWorkers())
	s.readLane = newWorkerPool(readWorkers)
	return s, nil
}

// Start restores the containers found in the state dir (before any request
// is served), then runs the loop. A Stop during the restore cuts it short:
// Start then returns ErrStopped and the loop never runs.
func (s *Supervisor) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.lifeMu.Lock()
	was := s.phase
	if was == phaseNew {
		s.phase, s.cancelStart = phaseStarting, cancel
	}
	s.lifeMu.Unlock()
	switch was {
	case phaseNew:
	case phaseStopped:
		return ErrStopped
	default:
		return errStarted
	}
	defer close(s.startDone)

	s.loadObjects()
	err := s.restore(ctx)
	if err == nil {
		s.exitLostObjects("no container of it was found at the restart")
		s.flush()
		s.scheduleReconcile()
	}
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	switch {
	case s.phase == phaseStopped:
		return ErrStopped
	case err != nil:
		s.phase = phaseFailed
		return fmt.Errorf("restore: %w", err)
	}
	s.phase = phaseRunning
	s.startSnapshots()
	go s.loop()
	return nil
}

// Stop ends the loop after the task in hand (or a restore in progress),
// commits and closes the journal and ends every subscription. Containers
// and shims keep running. It may be called in any phase, also after a
// failed Start, and more than once.
func (s *Supervisor) Stop() error {
	s.lifeMu.Lock()
	was := s.phase
	s.phase = phaseStopped
	cancel := s.cancelStart
	s.lifeMu.Unlock()
	switch was {
	case phaseStopped:
		<-s.stopped
		return nil
	case phaseStarting:
		cancel()
		<-s.startDone
	}
	close(s.stopCh)
	if was == phaseRunning {
		<-s.loopDone
		s.snapshots.close()
	} else {
		close(s.loopDone) // the loop never ran: release whoever waits on it
	}
	s.workers.stop()
	s.exitLane.stop()
	s.execLane.stop()
	s.readLane.stop()
	if _, real := s.rt.(realRuntime); real {
		runtime.DropSpares() // idle spare shims exit with the daemon anyway: at once, then
	}
	s.mon.Close()
	err := s.journal.Close()
	close(s.stopped)
	return err
}

// running reports whether the loop runs (restore done, not stopped).
func (s *Supervisor) running() bool {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	return s.phase == phaseRunning
}

// Metrics is the registry the supervisor reports into.
func (s *Supervisor) Metrics() metrics.Registry { return s.cfg.Metrics }

func (s *Supervisor) loop() {
	defer close(s.loopDone)
	in := &loopInputs{exits: s.mon.Exits(), ooms: s.mon.OOMs()}
	for {
		select {
		case t := <-s.urgent: // exits first, whatever else is waiting
			t(s)
		default:
			if s.next(in) {
				s.shutdown()
				return
			}
		}
		s.drain()
		s.flush()
		s.maybeSnapshot()
	}
}

// loopInputs are the monitor's channels; one that is closed (the monitor
// stopped) is set to nil, so the loop blocks on the others instead of
// spinning on it.
type loopInputs struct {
	exits <-chan monitor.ExitSource
	ooms  <-chan string
}

// next waits for the next task, exit or OOM and runs it; true means stop.
func (s *Supervisor) next(in *loopInputs) bool {
	exits, ooms := in.exits, in.ooms
	if s.heldFull() {
		exits, ooms = nil, nil // they wait in the monitor until the journal writes (degraded.go)
	}
	select {
	case t := <-s.urgent:
		t(s)
	case t := <-s.tasks:
		t(s)
	case src, ok := <-exits:
		if !ok {
			s.monitorGone(&in.exits)
			break
		}
		s.onExit(src)
	case id, ok := <-ooms:
		if !ok {
			in.ooms = nil
			break
		}
		s.onOOM(id)
	case <-s.stopCh:
		return true
	}
	return false
}

// monitorGone handles the close of the monitor's exit channel outside a
// Stop: no exit notification comes any more, so reconcile, which polls
// every process, is what finds exits from now on.
func (s *Supervisor) monitorGone(exits *<-chan monitor.ExitSource) {
	*exits = nil
	if !s.stopping {
		s.log.Error("the exit monitor stopped: exits are found by the reconcile pass only, every " + s.cfg.ReconcileInterval.String())
	}
}

// drain runs the tasks already waiting, exits first, so their events share
// one journal commit (group commit) without delaying anyone.
func (s *Supervisor) drain() {
	for i := 0; i < 64; i++ {
		select {
		case t := <-s.urgent:
			t(s)
			continue
		default:
		}
		select {
		case t := <-s.tasks:
			t(s)
		default:
			return
		}
	}
}

// flush commits the journal, then publishes and replies, in that order, so
// what any subscriber or client saw is on disk. A commit that fails (a full
// disk, a failed fsync: never retried as if it had succeeded) publishes
// nothing: the batch is held and the daemon degraded (degraded.go).
func (s *Supervisor) flush() {
	if len(s.outbox) == 0 {
		return
	}
	start := time.Now()
	err := s.journal.Commit()
	s.m.journalSync.UpdateSince(start)
	if err != nil {
		s.degrade(err)
		return
	}
	out := s.outbox
	s.outbox = nil
	for _, it := range out {
		s.release(it)
	}
}

func (s *Supervisor) shutdown() {
	s.stopping = true
	s.flush()
	s.maybeSnapshot()
	for sub := range s.subs {
		s.cutOff(sub, ErrStopped)
	}
}

// send enqueues a task from a worker or timer. It gives up only when the
// loop has stopped.
func (s *Supervisor) send(t task) {
	select {
	case s.tasks <- t:
	case <-s.loopDone:
	}
}

// sendUrgent is send for the exit lane: the loop runs these before any
// other task.
func (s *Supervisor) sendUrgent(t task) {
	select {
	case s.urgent <- t:
	case <-s.loopDone:
	}
}

// call runs f on the loop and waits for the reply it passes to done, bounded
// by ctx, so a stuck loop surfaces as an error rather than a hang.
func call[T any](ctx context.Context, s *Supervisor, kind string, f func(done func(T, error))) (T, error) {
	type result struct {
		v   T
		err error
	}
	var zero T
	ch := make(chan result, 1)
	start := time.Now()
	t := func(s *Supervisor) {
		s.m.task(kind)
		f(func(v T, err error) { ch <- result{v, err} })
	}
	select {
	case s.tasks <- t:
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-s.stopCh:
		return zero, ErrStopped
	}
	select {
	case r := <-ch:
		s.m.taskLatency.UpdateSince(start)
		return r.v, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-s.loopDone:
		return zero, ErrStopped
	}
}
