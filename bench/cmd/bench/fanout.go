package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/bench/internal/harness"
)

// fanout runs the same event load (pause/resume of a few containers, as
// fast as runc allows) with 1 subscriber and with fanoutSubs subscribers,
// alternating, while a prober times a Signal-0 task through the loop
// every 5 ms: the loop's task latency as a client sees it.
func (b *bench) fanout() error {
	bundle, err := b.env.Bundle("fanout")
	if err != nil {
		return err
	}
	d, err := b.env.NewDaemon("d-fanout")
	if err != nil {
		return err
	}
	if err := d.Start(); err != nil {
		return err
	}
	ctx := context.Background()
	const containers = 4
	for i := 0; i < containers; i++ {
		if _, err := d.Client.CreateContainer(ctx, &types.CreateContainerRequest{Id: b.env.ID(fmt.Sprintf("fan-%d", i)), BundlePath: bundle}); err != nil {
			return err
		}
	}
	var conns []types.APIClient
	for i := 0; i < 10; i++ {
		conn, c, err := d.NewClient()
		if err != nil {
			return err
		}
		defer conn.Close()
		conns = append(conns, c)
	}
	f := &fanouter{d: d, conns: conns, containers: containers, phase: b.cfg.fanoutPhase, id: func(i int) string { return b.env.ID(fmt.Sprintf("fan-%d", i)) }}
	var base, load []phaseResult
	for round := 0; round < 2; round++ {
		for _, subs := range []int{1, b.cfg.fanoutSubs} {
			r, err := f.run(subs)
			if err != nil {
				return fmt.Errorf("%d subscribers: %w", subs, err)
			}
			if subs == 1 {
				base = append(base, r)
			} else {
				load = append(load, r)
			}
		}
	}
	agg := func(rs []phaseResult) (delivered, source float64, probes []float64, bad int) {
		var secs float64
		for _, r := range rs {
			delivered += float64(r.delivered)
			source += float64(r.source)
			secs += r.took.Seconds()
			probes = append(probes, r.probes...)
			bad += r.gaps + r.cutoffs
		}
		return delivered / secs, source / secs, probes, bad
	}
	ld, ls, lp, lbad := agg(load)
	_, bs, bp, bbad := agg(base)
	if lbad+bbad > 0 {
		return fmt.Errorf("subscribers saw %d gaps, duplicates or cut-offs", lbad+bbad)
	}
	lp99, bp99 := harness.Percentile(lp, 99), harness.Percentile(bp, 99)
	b.rep.Add(harness.Figure{Name: "fanout_100_subscribers_events_per_s", Value: ld, Unit: "events/s",
		Floor: fmt.Sprintf("source rate %.0f events/s with %d subscribers, %.0f with 1", ls, b.cfg.fanoutSubs, bs),
		Note:  fmt.Sprintf("events received per second summed over %d live gRPC subscribers (10 connections), every one of them got every event in order; the source is pause/resume of %d containers, bounded by runc", b.cfg.fanoutSubs, containers)})
	b.rep.Add(harness.Figure{Name: "fanout_loop_task_latency_p99_ms", Value: lp99, Unit: "ms",
		Floor: fmt.Sprintf("same load with 1 subscriber: p99 %.2f ms (ratio %.2f)", bp99, lp99/bp99),
		Note:  fmt.Sprintf("round trip of Signal(sig 0), one loop task, every 5 ms while the %d subscribers run: median %.2f ms, %d probes", b.cfg.fanoutSubs, harness.Median(lp), len(lp))})
	b.rep.Line("fanout_loop_task_latency_p99_baseline_ms", bp99, "ms")
	b.rep.Line("fanout_source_events_per_s", ls, "events/s")
	return nil
}

type fanouter struct {
	d          *harness.Daemon
	conns      []types.APIClient
	containers int
	phase      time.Duration
	id         func(i int) string // container i's id
}

type phaseResult struct {
	delivered, source int
	took              time.Duration
	probes            []float64
	gaps, cutoffs     int
}

// subscriber counts the events it gets and checks their seqs are contiguous.
type subscriber struct {
	st      *harness.Stream
	n       atomic.Int64
	lastSeq atomic.Uint64
	gaps    atomic.Int64
	ended   atomic.Bool // the stream ended before we closed it: cut off
}

func (s *subscriber) read() {
	defer s.ended.Store(true)
	for r := range s.st.C {
		if last := s.lastSeq.Load(); last != 0 && r.Ev.Seq != last+1 {
			s.gaps.Add(1)
		}
		s.lastSeq.Store(r.Ev.Seq)
		s.n.Add(1)
	}
}

func (f *fanouter) run(nsubs int) (phaseResult, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	subs := make([]*subscriber, nsubs)
	for i := range subs {
		st, err := harness.Subscribe(ctx, f.conns[i%len(f.conns)], &types.EventsRequest{}, 8192)
		if err != nil {
			return phaseResult{}, err
		}
		subs[i] = &subscriber{st: st}
		go subs[i].read()
	}
	defer func() {
		for _, s := range subs {
			s.st.Close()
		}
	}()
	// A subscriber that got an event is registered: toggle until all have.
	deadline := time.Now().Add(20 * time.Second)
	for !allAt(subs, 1) {
		if time.Now().After(deadline) {
			return phaseResult{}, fmt.Errorf("subscribers not registered after 20 s")
		}
		if err := f.toggle(ctx, f.id(0)); err != nil {
			return phaseResult{}, err
		}
		time.Sleep(20 * time.Millisecond)
	}
	var startSeq uint64
	if err := waitFor(10*time.Second, func() bool {
		startSeq = maxSeq(subs)
		return allSeq(subs, startSeq)
	}); err != nil {
		return phaseResult{}, fmt.Errorf("subscribers did not catch up: %w", err)
	}
	for _, s := range subs {
		s.n.Store(0)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var genErr atomic.Value
	t0 := time.Now()
	harness.Repeat(f.containers, stop, &wg, func(i int) bool {
		if err := f.toggle(ctx, f.id(i)); err != nil {
			genErr.Store(err)
			return false
		}
		return true
	})
	var probeWG sync.WaitGroup
	probes := harness.ProbeLoop(f.d, f.id(0), stop, &probeWG)
	time.Sleep(f.phase)
	close(stop)
	wg.Wait()
	probeWG.Wait()
	if err, ok := genErr.Load().(error); ok {
		return phaseResult{}, err
	}
	// Every event was published before its reply: wait until every
	// subscriber has the same last seq; the time includes this drain.
	var endSeq uint64
	if err := waitFor(10*time.Second, func() bool {
		endSeq = maxSeq(subs)
		return allSeq(subs, endSeq)
	}); err != nil {
		return phaseResult{}, fmt.Errorf("subscribers did not catch up: %w", err)
	}
	r := phaseResult{took: time.Since(t0), probes: *probes, source: int(endSeq - startSeq)}
	for _, s := range subs {
		r.delivered += int(s.n.Load())
		r.gaps += int(s.gaps.Load())
		if s.ended.Load() {
			r.cutoffs++
		}
	}
	return r, nil
}

// toggle pauses and resumes a container: two events.
func (f *fanouter) toggle(ctx context.Context, id string) error {
	for _, status := range []string{"paused", "running"} {
		if _, err := f.d.Client.UpdateContainer(ctx, &types.UpdateContainerRequest{Id: id, Status: status}, grpc.WaitForReady(true)); err != nil {
			return err
		}
	}
	return nil
}

func allAt(subs []*subscriber, n int64) bool {
	for _, s := range subs {
		if s.n.Load() < n {
			return false
		}
	}
	return true
}

func maxSeq(subs []*subscriber) uint64 {
	var m uint64
	for _, s := range subs {
		m = max(m, s.lastSeq.Load())
	}
	return m
}

func allSeq(subs []*subscriber, seq uint64) bool {
	for _, s := range subs {
		if s.lastSeq.Load() != seq {
			return false
		}
	}
	return true
}

func waitFor(limit time.Duration, cond func() bool) error {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}
