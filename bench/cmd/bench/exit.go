package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/bench/internal/harness"
)

// exitLatency starts containers one after another whose init sleeps 50 ms,
// writes "STAMP <unix ns>" to a bind-mounted host file and exits; the
// latency is from that stamp to the receive of its exit event at a live
// subscriber. The state dir is on tmpfs (-dir, /dev/shm), as /run is in
// production. Every few exits the same container runs on bare runc and the
// floor is the stamp to the container's pidfd becoming readable.
//
// Two more series run on the same daemon: containers whose stdout is a FIFO
// nobody reads, full when they exit (exit_event_unread_stdout_*), and plain
// exits while 100 clients poll State in a loop (exit_event_*_under_state_load).
func (b *bench) exitLatency() error {
	stamps := b.env.Path("stamps")
	if err := os.MkdirAll(stamps, 0o777); err != nil {
		return err
	}
	base, err := b.env.Bundle("stamp-base", harness.BindMount(stamps, "/stamps"))
	if err != nil {
		return err
	}
	d, err := b.env.NewDaemon("d-exit")
	if err != nil {
		return err
	}
	if err := d.Start(); err != nil {
		return err
	}
	defer d.Kill() // not left to idle through the later groups
	ctx := context.Background()
	sub, err := harness.Subscribe(ctx, d.Client, &types.EventsRequest{}, 4096)
	if err != nil {
		return err
	}
	defer sub.Close()
	bare := harness.Runc{Bin: b.env.Bins.Runc, Root: b.env.Path("runc-exit")}
	b.env.Defer(bare.DeleteAll)
	x := &exiter{b: b, d: d, sub: sub, bare: bare, base: base, stamps: stamps}

	const warm = 5
	n, floors := b.cfg.exits, b.cfg.exitFloors
	every := max(1, n/floors)
	var plain exitSeries
	var floor []float64
	for i := 0; i < warm+n; i++ {
		l, err := x.daemonExit(ctx, b.env.ID(fmt.Sprintf("exit-%d", i)), false)
		if err != nil {
			return err
		}
		if i >= warm {
			plain.add(l)
		}
		if i >= warm && (i-warm)%every == 0 && len(floor) < floors {
			f, err := x.runcExit(ctx, b.env.ID(fmt.Sprintf("floor-%d", i)))
			if err != nil {
				return fmt.Errorf("floor: %w", err)
			}
			floor = append(floor, f)
		}
	}
	unread, err := x.series(ctx, "unread", n, true)
	if err != nil {
		return fmt.Errorf("unread stdout: %w", err)
	}
	loaded, polls, err := x.underStateLoad(ctx, n)
	if err != nil {
		return fmt.Errorf("under State load: %w", err)
	}
	x.report(plain, unread, loaded, floor, polls)
	return nil
}

// exitLat is one exit: from the process's stamp, and from the shim's reap
// time (the event's exitedAt), to the event's receipt.
type exitLat struct{ fromStamp, fromReap float64 }

type exitSeries struct{ stamp, reap []float64 }

func (s *exitSeries) add(l exitLat) {
	s.stamp = append(s.stamp, l.fromStamp)
	if l.fromReap >= 0 {
		s.reap = append(s.reap, l.fromReap)
	}
}

func (s exitSeries) p(q float64) float64 { return harness.Percentile(s.stamp, q) }

// series runs n daemon exits one after another (after a short warm-up).
func (x *exiter) series(ctx context.Context, name string, n int, unreadStdout bool) (exitSeries, error) {
	var out exitSeries
	for i := 0; i < 3+n; i++ {
		l, err := x.daemonExit(ctx, x.b.env.ID(fmt.Sprintf("%s-%d", name, i)), unreadStdout)
		if err != nil {
			return out, err
		}
		if i >= 3 {
			out.add(l)
		}
	}
	return out, nil
}

// underStateLoad runs the plain series while 100 clients (connections of
// another process) call State in a loop, each waiting for its reply before
// its next call.
func (x *exiter) underStateLoad(ctx context.Context, n int) (exitSeries, int64, error) {
	p, err := startStatePollers(x.d.Socket, 100)
	if err != nil {
		return exitSeries{}, 0, err
	}
	s, err := x.series(ctx, "loaded", n, false)
	polls, perr := p.stop()
	if err == nil {
		err = perr
	}
	return s, polls, err
}

func (x *exiter) report(plain, unread, loaded exitSeries, floor []float64, polls int64) {
	rep, n := x.b.rep, len(plain.stamp)
	f50, f99 := harness.Percentile(floor, 50), harness.Percentile(floor, 99)
	floorNote := fmt.Sprintf("bare runc, stamp → pidfd readable: p50 %.3f ms, p99 %.3f ms (%d exits, interleaved)", f50, f99, len(floor))
	rep.Add(harness.Figure{Name: "exit_event_p50_ms", Value: plain.p(50), Unit: "ms", Target: "<= 1.2", Goal: 1.2, Max: true, Floor: floorNote,
		Note: fmt.Sprintf("helper's STAMP → exit event received by a live gRPC subscriber, %d sequential exits, state dir on tmpfs (/dev/shm, like /run); ref. containerd 1.6 p50 2.4 ms, v0.2.9 29 ms", n)})
	rep.Add(harness.Figure{Name: "exit_event_p99_ms", Value: plain.p(99), Unit: "ms", Target: "<= 2.0", Goal: 2.0, Max: true, Floor: floorNote,
		Note: fmt.Sprintf("max %.2f ms", plain.p(100))})
	rep.Add(harness.Figure{Name: "exit_event_unread_stdout_p99_ms", Value: unread.p(99), Unit: "ms", Target: "<= 2.0", Goal: 2.0, Max: true, Floor: floorNote,
		Note: fmt.Sprintf("the same, with the container's stdout a FIFO nobody reads, full at the exit; p50 %.3f ms, max %.2f ms, %d exits", unread.p(50), unread.p(100), len(unread.stamp))})
	if len(plain.reap) > 0 {
		rep.Add(harness.Figure{Name: "exit_reap_to_subscriber_p50_ms", Value: harness.Percentile(plain.reap, 50), Unit: "ms",
			Note: fmt.Sprintf("the shim's reap time (exitedAt of the event) → receipt at a live gRPC subscriber, %d exits; ref. containerd 1.6 p50 0.84 ms on this machine", len(plain.reap))})
		rep.Add(harness.Figure{Name: "exit_reap_to_subscriber_p95_ms", Value: harness.Percentile(plain.reap, 95), Unit: "ms",
			Note: "ref. containerd 1.6 p95 1.0–1.3 ms on this machine"})
	}
	ratio := loaded.p(99) / plain.p(99)
	// The goal is "within a few ms of the same run without pollers", taken as 5.
	goal := plain.p(99) + 5
	rep.Add(harness.Figure{Name: "exit_event_p99_under_state_load_ms", Value: loaded.p(99), Unit: "ms",
		Target: fmt.Sprintf("<= %.1f (p99 without pollers + 5 ms)", goal), Goal: goal, Max: true,
		Floor: fmt.Sprintf("the same run without pollers: p99 %.3f ms (%.2f×)", plain.p(99), ratio),
		Note: fmt.Sprintf("plain exits while 100 clients call State in a loop (%d State replies during the series); p50 %.3f ms vs %.3f ms without; "+
			"of which the shim's reap → receipt: p50 %.3f ms, p99 %.3f ms (the rest is before the reap: the container's exit reaching its shim)",
			polls, loaded.p(50), plain.p(50), harness.Percentile(loaded.reap, 50), harness.Percentile(loaded.reap, 99))})
	rep.Line("exit_event_floor_p50_ms", f50, "ms")
	rep.Line("exit_event_floor_p99_ms", f99, "ms")
}

type exiter struct {
	b      *bench
	d      *harness.Daemon
	sub    *harness.Stream
	bare   harness.Runc
	base   string
	stamps string
}

// bundle writes a bundle for id that shares the base rootfs; with flood,
// the init also writes to stdout without end in the background.
func (x *exiter) bundle(id string, flood bool) (string, error) {
	args := []string{"sleep", "50ms", "--", "stamp", "/stamps/" + id}
	if flood {
		args = append([]string{"flood-bg", "--"}, args...)
	}
	return x.b.env.SharedBundle(filepath.Join(x.base, "rootfs"), filepath.Join("exit", id),
		harness.Mount(x.stamps, "/stamps"), harness.Args(args...))
}

func (x *exiter) daemonExit(ctx context.Context, id string, unreadStdout bool) (exitLat, error) {
	var l exitLat
	bundle, err := x.bundle(id, unreadStdout)
	if err != nil {
		return l, err
	}
	req := &types.CreateContainerRequest{Id: id, BundlePath: bundle}
	if unreadStdout {
		// A FIFO held open read-write by the bench and never read: the
		// container's output fills it and the process's pipe behind it.
		path := filepath.Join(bundle, "stdout")
		if err := unix.Mkfifo(path, 0o600); err != nil {
			return l, err
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return l, err
		}
		defer f.Close()
		req.Stdout = path
	}
	if _, err := x.d.Client.CreateContainer(ctx, req); err != nil {
		return l, err
	}
	timeout := time.After(30 * time.Second)
	for {
		select {
		case r, ok := <-x.sub.C:
			if !ok {
				return l, fmt.Errorf("event stream ended: %v", x.sub.Err())
			}
			if r.Ev.Type != "exit" || r.Ev.Id != id {
				continue
			}
			if r.Ev.Status != 0 {
				return l, fmt.Errorf("%s exited with %d", id, r.Ev.Status)
			}
			stamp, err := readStamp(filepath.Join(x.stamps, id))
			if err != nil {
				return l, err
			}
			l.fromStamp, l.fromReap = ms(r.At.Sub(stamp)), -1
			if at := r.Ev.GetExitedAt(); at != nil {
				l.fromReap = ms(r.At.Sub(at.AsTime()))
			}
			return l, nil
		case <-timeout:
			return l, fmt.Errorf("no exit event for %s within 30 s", id)
		}
	}
}

// runcExit runs the same container on bare runc and waits on its pidfd.
func (x *exiter) runcExit(ctx context.Context, id string) (float64, error) {
	bundle, err := x.bundle(id, false)
	if err != nil {
		return 0, err
	}
	pidFile := filepath.Join(bundle, "pid")
	if err := x.bare.Create(ctx, id, bundle, pidFile); err != nil {
		return 0, err
	}
	defer x.bare.DeleteForce(id)
	data, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, err
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return 0, fmt.Errorf("pidfd_open: %w", err)
	}
	defer unix.Close(fd)
	if err := x.bare.Start(ctx, id); err != nil {
		return 0, err
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 30_000)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return 0, fmt.Errorf("poll pidfd: %v (n=%d)", err, n)
		}
		break
	}
	seen := time.Now()
	stamp, err := readStamp(filepath.Join(x.stamps, id))
	if err != nil {
		return 0, err
	}
	return ms(seen.Sub(stamp)), nil
}

func readStamp(path string) (time.Time, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, fmt.Errorf("stamp: %w", err)
	}
	f := strings.Fields(string(data))
	if len(f) != 2 || f[0] != "STAMP" {
		return time.Time{}, fmt.Errorf("stamp file %s: %q", path, data)
	}
	ns, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(0, ns), nil
}
