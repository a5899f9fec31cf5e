package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/evjournal/containerd/api"
	"github.com/evjournal/containerd/api/server"
	"github.com/evjournal/containerd/internal/gcfloor"
	"github.com/evjournal/containerd/supervisor"
	metrics "github.com/rcrowley/go-metrics"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
)

const (
	// shutdownBudget bounds the whole shutdown: supervisors of the daemon
	// expect it gone within 2 s of SIGINT/SIGTERM (docs/api.md section 8, item 4).
	shutdownBudget = 1800 * time.Millisecond
	// workers is v0.2.9's size (docs/api.md 3.0); the subscriber buffer's
	// default, --subscriber-buffer, is v0.2.9's 2048 (3.13).
	workers = 10
)

// run is the daemon's life: state dir, lock, listen, register the API and
// health (NOT_SERVING), restore through the supervisor, SERVING, serve until
// SIGINT/SIGTERM, then a hard stop that leaves containers running.
func run(cfg config, log *logrus.Entry) error {
	log.WithFields(logrus.Fields{"version": api.Version(), "state-dir": cfg.stateDir, "journal-dir": cfg.journalDir, "listen": cfg.listen.String()}).
		Info("containerd starting")
	warnConfig(cfg, log)
	release, err := lockDirs(daemonDirs(cfg), log)
	if err != nil {
		return err
	}
	defer release()
	// RLIMIT_NOFILE is left alone: the Go runtime raises the daemon's soft
	// limit itself and restores the original in every process it starts, so
	// shims, runc and containers get the limits the daemon was started with.
	// A Setrlimit here would stop that restoring (syscall.Setrlimit).
	stop := handleSignals(log)

	listeners, err := listen(cfg.listen, cfg.socketGID, log)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.listen, err)
	}
	defer closeAll(listeners) // already closed by grpc's Stop in the normal case
	d, err := newDaemon(cfg, log)
	if err != nil {
		return err
	}
	return d.run(cfg, listeners, stop)
}

// daemonDirs are the dirs one daemon alone may use: the state dir and, when
// apart, the journal dir.
func daemonDirs(cfg config) []daemonDir {
	dirs := []daemonDir{{path: cfg.stateDir, what: "state dir", mode: stateDirMode}}
	if cfg.journalDir != cfg.stateDir {
		dirs = append(dirs, daemonDir{path: cfg.journalDir, what: "journal dir", mode: journalDirMode})
	}
	return dirs
}

// daemon holds what run wires together.
type daemon struct {
	log      *logrus.Entry
	registry metrics.Registry
	sup      *supervisor.Supervisor
	api      *server.Server
	grpc     *grpc.Server
	cri      *criEndpoint // nil without --cri-listen
}

func newDaemon(cfg config, log *logrus.Entry) (*daemon, error) {
	d := &daemon{log: log, registry: metrics.NewRegistry()}
	sup, err := supervisor.New(supervisorConfig(cfg, d.registry, log))
	if err != nil {
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	d.sup = sup
	d.api = server.New(sup, server.WithLogger(log))
	d.grpc = grpc.NewServer(server.ServerOptions(log)...)
	d.api.Register(d.grpc) // health says NOT_SERVING until restore is done
	if d.cri, err = newCRI(cfg, sup, log); err != nil {
		return nil, err
	}
	return d, nil
}

// criObjectsDir is where the supervisor checkpoints the CRI objects: beside
// the CRI service's records, so that a journal dir lost on its own loses
// none of the pods' lifecycle (the restore replays the new journal on it).
func criObjectsDir(cfg config) string {
	if cfg.cri.listen == "" {
		return ""
	}
	return filepath.Join(cfg.cri.root, "cri")
}

func supervisorConfig(cfg config, registry metrics.Registry, log *logrus.Entry) supervisor.Config {
	retain := cfg.retainCount
	if retain < 0 {
		retain = 0 // v0.2: 0 or less keeps everything
	}
	asideKeep := cfg.asideKeep
	if asideKeep <= 0 {
		asideKeep = -1 // the supervisor's "all"; its 0 means the default
	}
	reconcile := cfg.reconcileInterval
	if reconcile == 0 {
		reconcile = -1 // the supervisor's "never"; its 0 means the default
	}
	return supervisor.Config{
		StateDir:          cfg.stateDir,
		JournalDir:        cfg.journalDir,
		ObjectsDir:        criObjectsDir(cfg),
		Runtime:           cfg.runtime,
		RuntimeArgs:       cfg.runtimeArgs,
		Shim:              cfg.shim,
		StartTimeout:      cfg.startTimeout,
		SubscriberBuffer:  cfg.subscriberBuffer,
		RetainCount:       retain,
		AsideKeep:         asideKeep,
		SyncPolicy:        cfg.syncPolicy,
		ReconcileInterval: reconcile,
		Workers:           workers,
		Logger:            log,
		Metrics:           registry,
	}
}

// gcHeadroom is the garbage the daemon lets its heap hold between two
// collections (internal/gcfloor). 16 MiB since 2026-11-27 (8 before): the
// bench's 2000 replays of the last 100 events (about 28 KB of garbage
// each, 55 MB in all) cross half as many collections (8 were counted with
// 8 MiB), and on 2 CPUs each collection makes some of the slow calls that
// decide the p99 (full make bench runs: replay_last100_of_10m_grpc_ms
// 2.01 ms with 8 MiB, 1.43 with 16). An idle daemon is unchanged:
// trimWhenIdle pauses the tuner.
const gcHeadroom = 16 << 20

func (d *daemon) run(cfg config, listeners []net.Listener, stop <-chan os.Signal) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Bursts (a replay, a hundred State polls) collect every gcHeadroom of
	// garbage instead of every 2-4 MiB; idle, trimWhenIdle pauses that and
	// returns the free heap.
	gcTuner := gcfloor.Keep(gcHeadroom)
	defer gcTuner.Stop()
	stopDebug, err := startDebugServers(cfg, d.registry, d.log)
	if err != nil {
		d.shutdown(time.Now().Add(shutdownBudget))
		return err
	}
	defer stopDebug()
	if sig, err := d.start(ctx, stop); sig != nil || err != nil {
		serr := d.shutdown(time.Now().Add(shutdownBudget))
		if err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		d.log.WithField("signal", sig.String()).Info("stopped during restore")
		return serr
	}
	go sampleProcess(ctx, d.registry)
	if cfg.metricsInterval > 0 {
		go logMetrics(ctx, d.registry, cfg.metricsInterval, d.log)
	}
	d.api.SetServing(true)
	serveErr := serve(d.grpc, listeners)
	if d.cri != nil {
		criErr, err := d.cri.start(ctx)
		if err != nil {
			d.shutdown(time.Now().Add(shutdownBudget))
			return err
		}
		serveErr = merge(serveErr, criErr)
	}
	d.log.Info("containerd serving")
	go trimWhenIdle(ctx, d.registry, d.log, gcTuner)
	select {
	case sig := <-stop:
		deadline := time.Now().Add(shutdownBudget)
		d.log.WithField("signal", sig.String()).Info("shutting down; containers keep running")
		return d.shutdown(deadline)
	case err := <-serveErr:
		d.shutdown(time.Now().Add(shutdownBudget))
		return fmt.Errorf("serve: %w", err)
	}
}

// start restores through the supervisor. A stop signal during restore wins:
// it is returned and the caller shuts down.
func (d *daemon) start(ctx context.Context, stop <-chan os.Signal) (os.Signal, error) {
	done := make(chan error, 1)
	go func() { done <- d.sup.Start(ctx) }()
	select {
	case err := <-done:
		return nil, err
	case sig := <-stop:
		return sig, nil
	}
}

// merge forwards what either channel gives.
func merge(a, b <-chan error) <-chan error {
	out := make(chan error, 2)
	for _, c := range []<-chan error{a, b} {
		go func() {
			if err, ok := <-c; ok {
				out <- err
			}
		}()
	}
	return out
}

// serve serves g on every listener; the channel gets the first failure.
func serve(g *grpc.Server, listeners []net.Listener) <-chan error {
	errc := make(chan error, len(listeners))
	for _, lis := range listeners {
		go func() {
			if err := g.Serve(lis); err != nil {
				errc <- err
			}
		}()
	}
	return errc
}

// shutdown stops accepting and cuts every connection at once (a hard Stop,
// so streaming clients see "transport is closing", docs/api.md section 5),
// then stops the supervisor, which flushes the journal. Containers and shims
// keep running. Everything must end by deadline.
func (d *daemon) shutdown(deadline time.Time) error {
	d.api.SetServing(false)
	if err := within(deadline, func() error { d.grpc.Stop(); return nil }); err != nil {
		d.log.WithError(err).Error("grpc stop")
	}
	if d.cri != nil {
		if err := within(deadline, func() error { d.cri.stop(); return nil }); err != nil {
			d.log.WithError(err).Error("cri stop")
		}
	}
	if err := within(deadline, d.sup.Stop); err != nil {
		return fmt.Errorf("supervisor stop: %w", err)
	}
	d.log.Info("containerd stopped")
	return nil
}

var errTimeout = errors.New("timed out")

// within runs f and waits for it until deadline.
func within(deadline time.Time, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return errTimeout
	}
}

// startDebugServers starts pprof and the metrics endpoint, each only when
// its address is given.
func startDebugServers(cfg config, registry metrics.Registry, log *logrus.Entry) (func(), error) {
	var stops []func()
	stopAll := func() {
		for _, f := range stops {
			f()
		}
	}
	if cfg.pprofAddress != "" {
		s, err := serveHTTP("pprof", cfg.pprofAddress, pprofHandler(), log)
		if err != nil {
			return nil, fmt.Errorf("--pprof-address: %w", err)
		}
		stops = append(stops, s)
	}
	if cfg.metricsAddress != "" {
		s, err := serveHTTP("metrics", cfg.metricsAddress, metricsMux(registry), log)
		if err != nil {
			stopAll()
			return nil, fmt.Errorf("--metrics-address: %w", err)
		}
		stops = append(stops, s)
	}
	return stopAll, nil
}

// warnConfig logs the binaries chosen and settings that are accepted but
// will not work as asked.
func warnConfig(cfg config, log *logrus.Entry) {
	if cfg.graphiteAddress != "" {
		log.WithField("graphite-address", cfg.graphiteAddress).Warn("graphite is not supported; --graphite-address is ignored (use --metrics-address)")
	}
	logBinary("runtime", cfg.runtime, cfg.runtimeFrom, log)
	logBinary("shim", cfg.shim, cfg.shimFrom, log)
}
