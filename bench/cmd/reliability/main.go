// Command reliability runs the reliability suite (bench/reliability) in
// full mode, then each fuzz target for a bounded time, and prints one
// "name value unit" line per figure. It exits 1 if anything was lost,
// repeated, leaked or crashed. See `make reliability`.
//
//	go run ./bench/cmd/reliability [-short] [-dir DIR] [-skip chaos,...] [-fuzztime 20s]
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/evjournal/containerd/bench/internal/harness"
	"github.com/evjournal/containerd/bench/reliability"
)

// fuzzTargets are the fuzz targets run for -fuzztime each: the journal's
// decoder, id validation, and the API's request validation and conversion.
var fuzzTargets = []struct{ pkg, name, label string }{
	{"./supervisor/journal", "FuzzDecode", "journal_decode"},
	{"./bench/fuzz", "FuzzValidateID", "validate_id"},
	{"./bench/fuzz", "FuzzRequests", "requests"},
	{"./bench/fuzz", "FuzzUpdateResources", "update_resources"},
}

func main() {
	short := flag.Bool("short", false, "the CI sizes instead of the full ones")
	dir := flag.String("dir", "", "parent of the run's directory (default $TMPDIR)")
	skip := flag.String("skip", "", "comma-separated checks or \"fuzz\" to skip: "+checkNames())
	fuzztime := flag.Duration("fuzztime", 20*time.Second, "time per fuzz target (0 skips fuzzing)")
	seed := flag.Int64("seed", 0, "chaos seed (0: from the clock)")
	flag.Parse()

	cfg := reliability.Full()
	if *short {
		cfg = reliability.Short()
	}
	cfg.Dir, cfg.Seed, cfg.Out = *dir, *seed, os.Stdout
	cfg.Logf = func(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }
	cfg.Skip = map[string]bool{}
	for _, name := range strings.Split(*skip, ",") {
		if name = strings.TrimSpace(name); name != "" {
			cfg.Skip[name] = true
		}
	}
	t0 := time.Now()
	s := reliability.New(cfg)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		sig := <-sigs
		fmt.Fprintf(os.Stderr, "reliability: %v: cleaning up\n", sig)
		s.Close()
		os.Exit(130)
	}()
	s.RunChecks()
	s.Close()
	signal.Stop(sigs)
	failures := len(s.Failures)
	if !cfg.Skip["fuzz"] && *fuzztime > 0 {
		failures += fuzz(s.Report, *fuzztime, cfg.Logf)
	}
	fmt.Fprintf(os.Stderr, "reliability: %d failures in %s\n", failures, time.Since(t0).Round(time.Second))
	for _, f := range s.Failures {
		fmt.Fprintf(os.Stderr, "  %s\n", f)
	}
	if failures > 0 {
		os.Exit(1)
	}
}

func checkNames() string {
	var names []string
	for _, c := range reliability.Checks {
		names = append(names, c.Name)
	}
	return strings.Join(names, ", ")
}

var execsRE = regexp.MustCompile(`execs: (\d+)`)

// fuzz runs each target with `go test -fuzz` for d and reports the
// executions and whether it failed.
func fuzz(rep *harness.Report, d time.Duration, logf func(string, ...any)) int {
	root, err := harness.RepoRoot()
	if err != nil {
		logf("fuzz: %v", err)
		return 1
	}
	failures := 0
	for _, t := range fuzzTargets {
		cmd := exec.Command("go", "test", "-run", "^$", "-fuzz", "^"+t.name+"$", "-fuzztime", d.String(), t.pkg)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		execs := 0
		if m := execsRE.FindAllSubmatch(out, -1); len(m) > 0 {
			execs, _ = strconv.Atoi(string(m[len(m)-1][1]))
		}
		failed := 0
		if err != nil {
			failed = 1
			failures++
			logf("fuzz %s %s failed: %v\n%s", t.pkg, t.name, err, out)
		}
		name := "fuzz_" + t.label
		rep.Line(name+"_execs", float64(execs), "execs")
		rep.Line(name+"_failures", float64(failed), "failures")
	}
	return failures
}
