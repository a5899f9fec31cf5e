// Package reliability tries to make the daemon lose, repeat or invent an
// exit, lose an acknowledged event, leak, or fall over on bad input, and
// reports what it found as "name value unit" lines. `make reliability`
// runs the full mode (bench/cmd/reliability); `go test ./bench/reliability`
// runs the short mode, which is part of `make test`.
package reliability

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/evjournal/containerd/bench/internal/harness"
)

// Config sizes every check. Full and Short are the two modes.
type Config struct {
	Dir string // parent of the run's directory ("" = os.TempDir())

	ChaosKills   int           // daemon SIGKILLs in the chaos run
	ChaosTime    time.Duration // the chaos run stops after this even if kills remain
	ChaosWorkers int           // concurrent lifecycle workers

	CRIKills   int           // daemon SIGKILLs during CRI pod churn
	CRITime    time.Duration // the CRI run stops after this even if kills remain
	CRIWorkers int           // concurrent pod lifecycles

	HostileTime time.Duration // how long the cri-hostile check throws hostile pulls, creates and execs

	TornStride   int // torn-tail offsets tested: every TornStride-th byte (1 = every byte)
	CompactKills int // SIGKILLs of a daemon compacting a small journal under load

	BadInputLoad time.Duration // minimum time the bad-input table runs under load

	LeakCycles   int // create/delete cycles
	LeakParallel int

	SlowSubTimeout time.Duration // bound on waiting for the slow subscriber's cut-off

	Out  io.Writer            // the "name value unit" lines
	Logf func(string, ...any) // progress and failures, for people
	Seed int64                // chaos randomness (0 = time-based)
	Skip map[string]bool      // checks not to run (by name)
}

// Full is `make reliability`.
func Full() Config {
	return Config{ChaosKills: 24, ChaosTime: 6 * time.Minute, ChaosWorkers: 4, TornStride: 1, CompactKills: 12,
		BadInputLoad: 5 * time.Second, LeakCycles: 1000, LeakParallel: 4, SlowSubTimeout: 5 * time.Minute,
		CRIKills: 24, CRITime: 6 * time.Minute, CRIWorkers: 4, HostileTime: 2 * time.Minute}
}

// Short is the CI mode: the same checks, bounded to well under 2 minutes.
func Short() Config {
	return Config{ChaosKills: 6, ChaosTime: 40 * time.Second, ChaosWorkers: 3, TornStride: 5, CompactKills: 4,
		BadInputLoad: time.Second, LeakCycles: 100, LeakParallel: 4, SlowSubTimeout: 5 * time.Minute,
		CRIKills: 5, CRITime: 30 * time.Second, CRIWorkers: 3, HostileTime: 15 * time.Second}
}

// Suite is one run of the checks on one environment.
type Suite struct {
	cfg      Config
	env      *harness.Env
	Report   *harness.Report
	Failures []string
}

// Check is one named check of the suite.
type Check struct {
	Name string
	Run  func(*Suite) error
}

// Checks lists the suite's checks in the order they run.
var Checks = []Check{
	{"journal-faults", (*Suite).journalFaults},
	{"bad-input", (*Suite).badInput},
	{"slow-subscriber", (*Suite).slowSubscriber},
	{"leaks", (*Suite).leaks},
	{"chaos", (*Suite).chaos},
	{"cri-chaos", (*Suite).criChaos},
	{"cri-hostile", (*Suite).criHostile},
}

// Run runs every check not skipped, each on its own daemons in one
// environment that is torn down at the end whatever happens. An error of a
// check (it could not run) is a failure too.
func Run(cfg Config) *Suite {
	s := New(cfg)
	s.RunChecks()
	s.Close()
	return s
}

// New prepares a suite; RunChecks runs it, Close tears it down.
func New(cfg Config) *Suite {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	s := &Suite{cfg: cfg, Report: &harness.Report{Out: cfg.Out}}
	env, err := harness.NewEnv(cfg.Dir, "ctrd-rel-")
	if err != nil {
		s.failf("environment: %v", err)
		return s
	}
	s.env = env
	return s
}

// Close stops every daemon and container of the suite and removes its
// directory; what it had to kill is a failure. Safe to call from another
// goroutine (on a signal) and more than once.
func (s *Suite) Close() {
	if s.env == nil {
		return
	}
	if leaks := s.env.Close(); len(leaks) > 0 {
		s.failf("processes left behind (killed): %s", strings.Join(leaks, "; "))
	}
}

// startWithBundle starts a daemon of the suite (name and flags as for
// NewDaemon) and makes the sleeping bundle its check runs.
func (s *Suite) startWithBundle(bundle, name string, flags ...string) (*harness.Daemon, string, error) {
	d, err := s.env.NewDaemon(name, flags...)
	if err != nil {
		return nil, "", err
	}
	if err := d.Start(); err != nil {
		return nil, "", err
	}
	b, err := s.env.Bundle(bundle)
	return d, b, err
}

// RunChecks runs the checks not skipped, in order.
func (s *Suite) RunChecks() {
	if s.env == nil {
		return
	}
	cfg := s.cfg
	for _, c := range Checks {
		if cfg.Skip[c.Name] {
			continue
		}
		t0 := time.Now()
		cfg.Logf("reliability: %s ...", c.Name)
		if err := c.Run(s); err != nil {
			s.failf("%s: %v", c.Name, err)
		}
		cfg.Logf("reliability: %s took %s", c.Name, time.Since(t0).Round(time.Millisecond))
	}
}

func (s *Suite) failf(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	s.Failures = append(s.Failures, msg)
	if s.cfg.Logf != nil {
		s.cfg.Logf("FAIL: %s", msg)
	}
}

// zero adds a figure that must be 0, and a failure when it is not.
func (s *Suite) zero(name string, v int, unit string) {
	s.Report.Line(name, float64(v), unit)
	if v != 0 {
		s.failf("%s = %d, want 0", name, v)
	}
}

// line adds an informational figure.
func (s *Suite) line(name string, v float64, unit string) {
	s.Report.Line(name, v, unit)
}

func quiet() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return logrus.NewEntry(l)
}
