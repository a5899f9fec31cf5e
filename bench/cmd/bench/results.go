package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	goruntime "runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/evjournal/containerd/bench/internal/harness"
)

// writeResults writes the table of figures with the facts of the machine.
func writeResults(path string, b *bench, took time.Duration, load string, quickRun bool) error {
	var sb strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&sb, format, args...) }
	w("# Benchmark results\n\n")
	w("Written by `make bench` (`go run ./bench/cmd/bench -out bench/RESULTS.md`); how each figure is\n")
	w("measured and what limits it: `bench/README.md`. Every timing was taken in this run, interleaved\n")
	w("with its floor (bare runc on the same bundle, or the raw file operation) or, for the CRI, with\n")
	w("containerd 2.x's CRI plugin, so compare ratios, not absolute times: the machine is shared and small.\n\n")
	if quickRun {
		w("**Quick run (-quick): reduced sizes, figures not comparable with the targets.**\n\n")
	}
	w("| | |\n| --- | --- |\n")
	w("| date | %s |\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	w("| machine | %s |\n", machine())
	w("| kernel | %s |\n", kernel())
	w("| runc | %s |\n", runcVersion(b.env.Bins.Runc))
	w("| Go | %s |\n", goruntime.Version())
	w("| daemon state dirs, runc roots | %s (tmpfs, as /run in production) |\n", fsName(b.env.Dir))
	w("| journal files (journal_* and replay_*) | %s |\n", fsName(os.TempDir()))
	if b.peerVersion != "" {
		w("| CRI peer (cri group) | %s, its CRI plugin: built from the Go module proxy (`make bench-peer`); its default config but for private dirs, runc options BinaryName = bin/runc, sandbox image = bin/pause pushed to the run's registry, restrict_oom_score_adj (bench/README.md) |\n", b.peerVersion)
	}
	w("| load average | %s |\n", load)
	w("| run time | %s |\n\n", took.Round(time.Second))
	head := false
	for _, f := range b.rep.Figures {
		if isDetail(f) || f.Ours != "" {
			continue
		}
		if !head {
			w("| figure | value | unit | target | value ÷ target | met | floor, same run | notes |\n")
			w("| --- | ---: | --- | --- | ---: | --- | --- | --- |\n")
			head = true
		}
		target, ratio, met := "—", "—", "—"
		if f.HasGoal() {
			target = f.Target
			ratio = fmt.Sprintf("%.2f", f.Value/f.Goal)
			met = map[bool]string{true: "yes", false: "**no**"}[f.Met()]
		}
		w("| `%s` | %s | %s | %s | %s | %s | %s | %s |\n", f.Name, harness.Num(f.Value), f.Unit, target, ratio, met,
			orDash(f.Floor), orDash(f.Note))
	}
	criTable(w, b)
	w("\nSupporting lines printed by the run:\n\n```\n")
	for _, f := range b.rep.Figures {
		if isDetail(f) {
			w("%s %s %s\n", f.Name, harness.Num(f.Value), f.Unit)
		}
	}
	w("```\n")
	return os.WriteFile(path, []byte(sb.String()), 0o644)
}

// criTable writes the figures measured beside the CRI peer: both
// measurements, then the ratio.
func criTable(w func(string, ...any), b *bench) {
	head := false
	for _, f := range b.rep.Figures {
		if f.Ours == "" {
			continue
		}
		if !head {
			w("\nThe CRI (cri group) beside the CRI plugin of %s, the same CRI client timing both, interleaved; value = ours ÷ containerd unless the notes say otherwise:\n\n", orDash(b.peerVersion))
			w("| figure | ours | containerd | value | unit | target | met | notes |\n")
			w("| --- | ---: | ---: | ---: | --- | --- | --- | --- |\n")
			head = true
		}
		target, met := "—", "—"
		if f.HasGoal() {
			target = f.Target
			met = map[bool]string{true: "yes", false: "**no**"}[f.Met()]
		}
		w("| `%s` | %s | %s | %s | %s | %s | %s | %s |\n", f.Name, orDash(f.Ours), orDash(f.Peer), harness.Num(f.Value), f.Unit, target, met, orDash(f.Note))
	}
}

// isDetail tells the supporting lines from the headline figures (those
// carry a floor or a note, or stand beside a peer's).
func isDetail(fig harness.Figure) bool {
	if fig.Ours != "" {
		return false
	}
	name := fig.Name
	for _, f := range []string{"daemon_rss_idle_mib", "start_ratio_vs_runc", "concurrent_start_ratio_vs_runc", "exit_event_p50_ms", "exit_event_p99_ms",
		"exit_event_unread_stdout_p99_ms", "exit_reap_to_subscriber_p50_ms", "exit_reap_to_subscriber_p95_ms", "exit_event_p99_under_state_load_ms",
		"shim_rss_median_kib", "shim_pss_median_kib", "daemon_rss_100_mib", "restore_500_s", "journal_append_per_s_always",
		"journal_append_per_s_batch", "journal_append_per_s_none", "replay_last100_of_1m_ms", "replay_full_1m_ratio_vs_read",
		"journal_open_10m_ms", "daemon_rss_10m_journal_mib", "replay_last100_of_10m_grpc_ms", "fanout_100_subscribers_events_per_s", "fanout_loop_task_latency_p99_ms"} {
		if f == name {
			return false
		}
	}
	return true
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return strings.ReplaceAll(s, "|", "\\|")
}

func machine() string {
	model := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	mem := ""
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		mem = fmt.Sprintf(", %.1f GiB RAM", float64(si.Totalram)*float64(si.Unit)/(1<<30))
	}
	return fmt.Sprintf("%d CPUs (%s)%s", goruntime.NumCPU(), model, mem)
}

func kernel() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:]) + " " + unix.ByteSliceToString(u.Machine[:])
}

func runcVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "unknown"
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.Join(lines, ", ") + " (bin/runc, built from go.mod)"
}
