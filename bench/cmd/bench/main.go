// Command bench measures the daemon side by side with bare runc and writes
// bench/RESULTS.md (see `make bench`). Every timing is taken in the same
// run as its floor, interleaved with it, and reported as a ratio; absolute
// times on a shared 2-core machine are noise.
//
//	go run ./bench/cmd/bench [-out bench/RESULTS.md] [-dir /dev/shm] [-only start,exit,...,cri] [-peer DIR] [-quick]
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/evjournal/containerd/bench/internal/harness"
)

// config holds the sizes of every group; -quick shrinks them for a smoke run.
type config struct {
	seqN        int // sequential starts per side
	concN       int // containers per concurrent round
	concRounds  int // concurrent rounds per side
	exits       int // exits timed through the daemon
	exitFloors  int // exits timed on bare runc
	restoreN    int // live containers at the daemon's SIGKILL
	appendTime  time.Duration
	journalN    int // events of the replay journal
	journal10mN int // events of the journal a daemon starts on
	fanoutSubs  int
	fanoutPhase time.Duration
	// The cri group: pods run one after another; ExecSync calls one after
	// another, concurrent callers, their calls each and rounds per side;
	// exits per kind (status polled, event) per side; pods at once, their
	// rounds, stats calls per side, the idle CPU window.
	criLifecycle, criExecSeq, criExecCallers, criExecPerCaller, criExecRounds int
	criExits, criPods, criRounds, criStatsCalls                               int
	criIdleWindow                                                             time.Duration
}

var full = config{seqN: 50, concN: 100, concRounds: 5, exits: 500, exitFloors: 100, restoreN: 500,
	appendTime: 2 * time.Second, journalN: 1_000_000, journal10mN: 10_000_000, fanoutSubs: 100, fanoutPhase: 8 * time.Second,
	criLifecycle: 20, criExecSeq: 200, criExecCallers: 20, criExecPerCaller: 10, criExecRounds: 2,
	criExits: 40, criPods: 50, criRounds: 2, criStatsCalls: 10, criIdleWindow: 10 * time.Second}

var quick = config{seqN: 10, concN: 20, concRounds: 1, exits: 40, exitFloors: 10, restoreN: 50,
	appendTime: 500 * time.Millisecond, journalN: 100_000, journal10mN: 1_000_000, fanoutSubs: 100, fanoutPhase: 3 * time.Second,
	criLifecycle: 5, criExecSeq: 40, criExecCallers: 20, criExecPerCaller: 5, criExecRounds: 1,
	criExits: 10, criPods: 10, criRounds: 1, criStatsCalls: 3, criIdleWindow: 3 * time.Second}

// bench is one run: its environment, sizes and figures.
type bench struct {
	env *harness.Env
	cfg config
	rep *harness.Report
	// peerDir holds the cri group's containerd (-peer; default
	// harness.PeerDir), peerVersion what its --version said.
	peerDir, peerVersion string
	// criSteps are the cri group's steps to run (-cri-steps; all if empty).
	criSteps []string
	// versus, when set (-versus-ours), is a second build of ours (its
	// daemon and shim) that the cri group runs in containerd's place.
	versus *build
}

// build is a daemon binary and its shim's.
type build struct{ daemon, shim string }

type group struct {
	name string
	run  func(*bench) error
}

var groups = []group{
	{"start", (*bench).start},           // start ratios, then shim/daemon memory and restore on the same daemon
	{"exit", (*bench).exitLatency},      // exit event latency
	{"journal", (*bench).journal},       // append and replay through the journal package
	{"journal10m", (*bench).journal10m}, // a daemon on a 10M-event journal: start, memory, replay
	{"fanout", (*bench).fanout},         // 100 subscribers and the loop's latency
	{"cri", (*bench).cri},               // the CRI beside containerd 2.x's
}

func main() {
	out := flag.String("out", "", "write the results table to this file (e.g. bench/RESULTS.md)")
	dir := flag.String("dir", "/dev/shm", "parent of the run's directory: daemon state dirs and runc roots (tmpfs, like /run)")
	only := flag.String("only", "", "comma-separated groups to run (start, exit, journal, journal10m, fanout, cri); default all")
	peer := flag.String("peer", "", "dir of the cri group's containerd and containerd-shim-runc-v2 (default: bench/build/containerd-"+harness.PeerVersion+", made by `make bench-peer`)")
	criSteps := flag.String("cri-steps", "", "comma-separated steps of the cri group to run (lifecycle, exec, exits, pods); default all")
	quickFlag := flag.Bool("quick", false, "small sizes, for a smoke run (figures not comparable)")
	versus := flag.String("versus-ours", "", "DAEMON,SHIM: an A/B of a change: the cri group runs this build of ours (its containerd and containerd-shim) where containerd runs, interleaved the same way, so each ratio reads bin/'s ÷ this build's (not with -out)")
	flag.Parse()
	if spec := os.Getenv(pollerEnv); spec != "" {
		os.Exit(runPollers(spec))
	}
	var steps []string
	if *criSteps != "" {
		steps = strings.Split(*criSteps, ",")
	}
	var other *build
	if *versus != "" {
		d, sh, ok := strings.Cut(*versus, ",")
		if !ok || d == "" || sh == "" {
			fmt.Fprintf(os.Stderr, "bench: -versus-ours %q: want DAEMON,SHIM (two paths)\n", *versus)
			os.Exit(2)
		}
		if *out != "" {
			fmt.Fprintln(os.Stderr, "bench: -versus-ours compares two builds of ours: its figures are not containerd's, so it writes no -out table")
			os.Exit(2)
		}
		other = &build{daemon: d, shim: sh}
	}
	os.Exit(run(*out, *dir, *only, *peer, steps, *quickFlag, other))
}

func run(out, dir, only, peerDir string, criSteps []string, quickRun bool, versus *build) int {
	start := time.Now()
	loadBefore := loadAvg()
	env, err := harness.NewEnv(dir, "ctrd-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	stopSignals := cleanupOnSignal(env)
	defer stopSignals()
	b := &bench{env: env, cfg: full, rep: &harness.Report{Out: os.Stdout}, peerDir: peerDir, criSteps: criSteps, versus: versus}
	if quickRun {
		b.cfg = quick
	}
	failed := 0
	for _, g := range groups {
		if only != "" && !contains(strings.Split(only, ","), g.name) {
			continue
		}
		t0 := time.Now()
		if err := g.run(b); err != nil {
			failed++
			fmt.Fprintf(os.Stderr, "bench: %s: %v\n", g.name, err)
		}
		fmt.Fprintf(os.Stderr, "bench: group %s took %s\n", g.name, time.Since(t0).Round(time.Millisecond))
	}
	if leaks := env.Close(); len(leaks) > 0 {
		failed++
		fmt.Fprintf(os.Stderr, "bench: processes left behind (killed):\n  %s\n", strings.Join(leaks, "\n  "))
	}
	took := time.Since(start)
	fmt.Fprintf(os.Stderr, "bench: total %s\n", took.Round(time.Second))
	if out != "" {
		load := fmt.Sprintf("%s at the start, %s at the end (1, 5, 15 min)", loadBefore, loadAvg())
		if err := writeResults(out, b, took, load, quickRun); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			failed++
		}
	}
	if failed > 0 {
		return 1
	}
	return 0
}

// cleanupOnSignal tears the environment down on SIGINT/SIGTERM, so an
// interrupted run leaves no container, shim or daemon behind.
func cleanupOnSignal(env *harness.Env) func() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			fmt.Fprintf(os.Stderr, "bench: %v: cleaning up\n", sig)
			env.Close()
			os.Exit(130)
		case <-done:
		}
	}()
	return func() { signal.Stop(ch); close(done) }
}

// loadAvg is the first three fields of /proc/loadavg.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if strings.TrimSpace(y) == x {
			return true
		}
	}
	return false
}
