package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/bench/internal/harness"
)

// start measures sequential and concurrent starts against bare runc on the
// same bundle, then, on the same daemon with the last round's containers
// still running, shim and daemon memory, then restore with restoreN live
// containers.
func (b *bench) start() error {
	bundle, err := b.env.Bundle("sleep")
	if err != nil {
		return err
	}
	d, err := b.env.NewDaemon("d-start")
	if err != nil {
		return err
	}
	if err := d.Start(); err != nil {
		return err
	}
	if err := b.daemonIdleMemory(d); err != nil {
		return fmt.Errorf("idle memory: %w", err)
	}
	bare := harness.Runc{Bin: b.env.Bins.Runc, Root: b.env.Path("runc-bare")}
	b.env.Defer(bare.DeleteAll)
	pids := b.env.Path("pids")
	if err := os.MkdirAll(pids, 0o755); err != nil {
		return err
	}
	s := &starter{b: b, d: d, bare: bare, bundle: bundle, pids: pids}
	if err := s.sequential(); err != nil {
		return fmt.Errorf("sequential: %w", err)
	}
	if err := s.concurrent(); err != nil {
		return fmt.Errorf("concurrent: %w", err)
	}
	if err := s.memory(); err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	if err := s.restore(); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	return nil
}

type starter struct {
	b      *bench
	d      *harness.Daemon
	bare   harness.Runc
	bundle string
	pids   string
}

func (s *starter) daemonStart(ctx context.Context, id string) error {
	_, err := s.d.Client.CreateContainer(ctx, &types.CreateContainerRequest{Id: id, BundlePath: s.bundle})
	return err
}

func (s *starter) runcStart(ctx context.Context, id string) error {
	return s.bare.Run(ctx, id, s.bundle, filepath.Join(s.pids, id))
}

// sequential alternates which side goes first, after 3 warm-up starts each.
func (s *starter) sequential() error {
	const warm = 3
	n := s.b.cfg.seqN
	ctx := context.Background()
	var dms, rms, pairs []float64
	for i := 0; i < warm+n; i++ {
		sides := []func() (time.Duration, error){
			func() (time.Duration, error) {
				return timed(func() error { return s.daemonStart(ctx, s.b.env.ID(fmt.Sprintf("seq-d%d", i))) })
			},
			func() (time.Duration, error) {
				return timed(func() error { return s.runcStart(ctx, s.b.env.ID(fmt.Sprintf("seq-r%d", i))) })
			},
		}
		if i%2 == 1 {
			sides[0], sides[1] = sides[1], sides[0]
		}
		var took [2]time.Duration
		for k, side := range sides {
			t, err := side()
			if err != nil {
				return err
			}
			took[k] = t
		}
		if i%2 == 1 {
			took[0], took[1] = took[1], took[0]
		}
		if i >= warm {
			dms = append(dms, ms(took[0]))
			rms = append(rms, ms(took[1]))
			pairs = append(pairs, ms(took[0])/ms(took[1]))
		}
	}
	dm, rm := harness.Median(dms), harness.Median(rms)
	s.b.rep.Add(harness.Figure{Name: "start_ratio_vs_runc", Value: dm / rm, Unit: "ratio", Target: "<= 1.10", Goal: 1.10, Max: true,
		Floor: fmt.Sprintf("runc create + runc start: median %.1f ms", rm),
		Note: fmt.Sprintf("CreateContainer through the gRPC client until it returns (container running, start-container journaled): median %.1f ms, p90 %.1f ms; runc p90 %.1f ms; N=%d sequential each, interleaved; ref. conmon create + runc start 1.4–1.7×, containerd 1.6 `ctr run -d` ≈3×, v0.2.9 1.55×",
			dm, harness.Percentile(dms, 90), harness.Percentile(rms, 90), n)})
	s.b.rep.Line("start_ratio_paired_median", harness.Median(pairs), "ratio")
	s.b.rep.Line("start_daemon_median_ms", dm, "ms")
	s.b.rep.Line("start_runc_median_ms", rm, "ms")
	if err := killAll(s.d); err != nil {
		return err
	}
	s.bare.DeleteAll()
	return nil
}

// concurrent starts concN containers at once per round on each side, the
// order of the sides alternating; the last round is the daemon's and its
// containers are left running for the memory figures.
func (s *starter) concurrent() error {
	n, rounds := s.b.cfg.concN, s.b.cfg.concRounds
	ctx := context.Background()
	var dw, rw []float64
	for k := 0; k < rounds; k++ {
		order := []string{"runc", "daemon"}
		if k%2 == 1 {
			order = []string{"daemon", "runc"}
		}
		for _, side := range order {
			start := s.daemonStart
			if side == "runc" {
				start = s.runcStart
			}
			wall, err := together(n, func(i int) error { return start(ctx, s.b.env.ID(fmt.Sprintf("conc%d-%s%d", k, side[:1], i))) })
			if err != nil {
				return fmt.Errorf("%s round %d: %w", side, k, err)
			}
			if side == "runc" {
				rw = append(rw, ms(wall))
				s.bare.DeleteAll()
			} else {
				dw = append(dw, ms(wall))
				if k != rounds-1 {
					if err := killAll(s.d); err != nil {
						return err
					}
				}
			}
			time.Sleep(500 * time.Millisecond) // let the teardown's work finish
		}
	}
	dm, rm := harness.Median(dw), harness.Median(rw)
	s.b.rep.Add(harness.Figure{Name: "concurrent_start_ratio_vs_runc", Value: dm / rm, Unit: "ratio", Target: "<= 1.0", Goal: 1.0, Max: true,
		Floor: fmt.Sprintf("%d bare `runc create`+`runc start` at once: median wall %.0f ms", n, rm),
		Note:  fmt.Sprintf("%d CreateContainer calls at once, wall time until the last returns: median %.0f ms over %d rounds (the daemon runs at most 10 starts in parallel: its worker pool)", n, dm, rounds)})
	s.b.rep.Line("concurrent_start_daemon_wall_ms", dm, "ms")
	s.b.rep.Line("concurrent_start_runc_wall_ms", rm, "ms")
	return nil
}

// memory reads every init shim's smaps_rollup and the daemon's RSS with the
// last concurrent round's containers running.
func (s *starter) memory() error {
	time.Sleep(2 * time.Second) // past the start burst
	shims := s.b.env.Shims(s.d.StateDir)
	if len(shims) != s.b.cfg.concN {
		return fmt.Errorf("found %d shims, want %d", len(shims), s.b.cfg.concN)
	}
	var rss, pss []float64
	for _, p := range shims {
		r, q, err := harness.SmapsRollup(p.Pid)
		if err != nil {
			return err
		}
		rss, pss = append(rss, float64(r)), append(pss, float64(q))
	}
	s.b.rep.Add(harness.Figure{Name: "shim_rss_median_kib", Value: harness.Median(rss), Unit: "KiB", Target: "<= 2048", Goal: 2048, Max: true,
		Note: fmt.Sprintf("Rss of /proc/PID/smaps_rollup over the %d running shims (max %.0f); ref. conmon 2,070 KiB, v0.2.9 shim 5.7 MB, containerd 1.6 shim 13.2 MB", len(shims), harness.Percentile(rss, 100))})
	s.b.rep.Add(harness.Figure{Name: "shim_pss_median_kib", Value: harness.Median(pss), Unit: "KiB", Target: "<= 512", Goal: 512, Max: true,
		Note: "Pss: the shared text of the static binary divided among the shims; ref. conmon 377 KiB, containerd 1.6 shim 2.8 MiB"})
	vmrss, err := harness.StatusField(s.d.Pid(), "VmRSS")
	if err != nil {
		return err
	}
	fds, _ := harness.FDCount(s.d.Pid())
	s.b.rep.Add(harness.Figure{Name: "daemon_rss_100_mib", Value: float64(vmrss) / 1024, Unit: "MiB", Target: "<= 16", Goal: 16, Max: true,
		Note: fmt.Sprintf("VmRSS of the daemon with %d running containers (%d fds); ref. containerd 1.6 46.7 MiB with 30", s.b.cfg.concN, fds)})
	return nil
}

// daemonIdleMemory reads the RSS of a daemon that has just started on an
// empty state dir and has served no request but its health check, once its
// start-up work has settled.
func (b *bench) daemonIdleMemory(d *harness.Daemon) error {
	time.Sleep(2 * time.Second)
	vmrss, err := harness.StatusField(d.Pid(), "VmRSS")
	if err != nil {
		return err
	}
	b.rep.Add(harness.Figure{Name: "daemon_rss_idle_mib", Value: float64(vmrss) / 1024, Unit: "MiB", Target: "<= 12", Goal: 12, Max: true,
		Note: "VmRSS of the daemon 2 s after it started on an empty state dir, no container; ref. v0.2.9 12.7 MB, containerd 1.6 37.7 MB"})
	return nil
}

// restore tops the running containers up to restoreN, SIGKILLs the daemon,
// starts it again and times until State lists all of them running.
func (s *starter) restore() error {
	n := s.b.cfg.restoreN
	ctx := context.Background()
	more := n - s.b.cfg.concN
	if _, err := limited(more, 10, func(i int) error { return s.daemonStart(ctx, s.b.env.ID(fmt.Sprintf("rest-%d", i))) }); err != nil {
		return err
	}
	if got := len(s.d.Runc().IDs()); got != n {
		return fmt.Errorf("%d containers in the runc root, want %d", got, n)
	}
	listT0 := time.Now()
	if err := s.d.Runc().List(); err != nil {
		return err
	}
	runcList := time.Since(listT0)
	if err := s.d.Kill(); err != nil {
		return err
	}
	t0 := time.Now()
	if err := s.d.Spawn(); err != nil {
		return err
	}
	serving := make(chan time.Duration, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		s.d.WaitServing(cctx)
		serving <- time.Since(t0)
	}()
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		st, err := s.d.Client.State(cctx, &types.StateRequest{}, grpc.WaitForReady(true))
		cancel()
		if err != nil {
			return fmt.Errorf("state after restart: %w", err)
		}
		if running(st) == n {
			break
		}
		if time.Since(t0) > 2*time.Minute {
			return fmt.Errorf("after 2 min only %d of %d listed running", running(st), n)
		}
	}
	total := time.Since(t0)
	srv := <-serving
	listing := total - srv
	s.b.rep.Add(harness.Figure{Name: "restore_500_s", Value: total.Seconds(), Unit: "s", Target: "<= 2", Goal: 2, Max: true,
		Floor: fmt.Sprintf("`runc list` of the same %d containers: %.2f s", n, runcList.Seconds()),
		Note: fmt.Sprintf("SIGKILL with %d live containers, restart, until State lists all running; health SERVING (restore done) after %.3f s, then %.3f s more until State listed them (State reads each container's pids from its cgroup)",
			n, srv.Seconds(), listing.Seconds())})
	s.b.rep.Line("restore_500_serving_s", srv.Seconds(), "s")
	s.b.rep.Line("restore_500_state_after_serving_s", listing.Seconds(), "s")
	s.d.Kill()
	s.d.Runc().DeleteAll()
	return nil
}

func running(st *types.StateResponse) int {
	n := 0
	for _, c := range st.GetContainers() {
		if c.GetStatus() == "running" {
			n++
		}
	}
	return n
}

// killAll SIGKILLs every container of the daemon and waits until the
// daemon lists none and has deleted them from its runc root.
func killAll(d *harness.Daemon) error {
	ctx := context.Background()
	st, err := d.Client.State(ctx, &types.StateRequest{})
	if err != nil {
		return err
	}
	limited(len(st.GetContainers()), 10, func(i int) error {
		_, err := d.Client.Signal(ctx, &types.SignalRequest{Id: st.Containers[i].Id, Pid: "init", Signal: uint32(syscall.SIGKILL)})
		return err
	})
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		st, err := d.Client.State(ctx, &types.StateRequest{})
		if err == nil && len(st.GetContainers()) == 0 && len(d.Runc().IDs()) == 0 {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("containers still there 2 min after SIGKILL")
}

// together runs f(0..n-1) on n goroutines released at once and returns the
// wall time until the last returns.
func together(n int, f func(i int) error) (time.Duration, error) {
	return limited(n, n, f)
}

// limited runs f(0..n-1) with at most par at a time; wall time and the
// first error.
func limited(n, par int, f func(i int) error) (time.Duration, error) {
	var wg sync.WaitGroup
	errs := make([]error, n)
	sem := make(chan struct{}, par)
	gate := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = f(i)
		}()
	}
	t0 := time.Now()
	close(gate)
	wg.Wait()
	wall := time.Since(t0)
	for _, err := range errs {
		if err != nil {
			return wall, err
		}
	}
	return wall, nil
}

func timed(f func() error) (time.Duration, error) {
	t0 := time.Now()
	err := f()
	return time.Since(t0), err
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
