package reliability

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/bench/internal/harness"
)

var resumeRE = regexp.MustCompile(`resume after seq (\d+)`)

// slowSubscriber attaches, under a steady event load, a subscriber that
// never reads (its own connection, with gRPC's smallest flow-control
// windows so the daemon cannot park much in transport buffers). The daemon
// must cut it off with an error naming the seq to resume after; the events
// it got plus a resume from that seq must be exactly the stream a fast
// subscriber saw; and the loop's latency (a Signal-0 task every 5 ms) must
// not suffer meanwhile, compared with the same load before it attached.
func (s *Suite) slowSubscriber() error {
	d, err := s.env.NewDaemon("slowsub")
	if err != nil {
		return err
	}
	if err := d.Start(); err != nil {
		return err
	}
	bundle, err := s.env.Bundle("slowsub-sleep")
	if err != nil {
		return err
	}
	ctx := context.Background()
	ids := []string{s.env.ID("ss0"), s.env.ID("ss1"), s.env.ID("ss2"), s.env.ID("ss3")}
	for _, id := range ids {
		if _, err := d.Client.CreateContainer(ctx, &types.CreateContainerRequest{Id: id, BundlePath: bundle}); err != nil {
			return err
		}
	}
	fast, err := harness.Subscribe(ctx, d.Client, &types.EventsRequest{}, 1<<16)
	if err != nil {
		return err
	}
	defer fast.Close()
	var fastMu sync.Mutex
	fastSeen := map[uint64]*types.Event{}
	fastDone := make(chan struct{})
	go func() {
		defer close(fastDone)
		for r := range fast.C {
			fastMu.Lock()
			fastSeen[r.Ev.Seq] = r.Ev
			fastMu.Unlock()
		}
	}()

	stopGen := make(chan struct{})
	var gen sync.WaitGroup
	for _, id := range ids {
		gen.Add(1)
		go func() {
			defer gen.Done()
			for {
				select {
				case <-stopGen:
					return
				default:
				}
				for _, st := range []string{"paused", "running"} {
					d.Client.UpdateContainer(ctx, &types.UpdateContainerRequest{Id: id, Status: st})
				}
			}
		}()
	}
	genStopped := false
	stopGenerator := func() {
		if !genStopped {
			genStopped = true
			close(stopGen)
			gen.Wait()
		}
	}
	defer stopGenerator()

	// Phase A: the load alone.
	phase := 3 * time.Second
	stopA := make(chan struct{})
	var wgA sync.WaitGroup
	baseline := probe(d, ids[0], stopA, &wgA)
	time.Sleep(phase)
	close(stopA)
	wgA.Wait()

	// Phase B: plus a subscriber that never reads.
	conn, slowClient, err := d.NewClient(grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16))
	if err != nil {
		return err
	}
	defer conn.Close()
	cutsBefore := d.LogCount("event subscriber too slow")
	sctx, cancelSlow := context.WithCancel(ctx)
	defer cancelSlow()
	slow, err := slowClient.Events(sctx, &types.EventsRequest{})
	if err != nil {
		return err
	}
	stopB := make(chan struct{})
	var wgB sync.WaitGroup
	loaded := probe(d, ids[0], stopB, &wgB)
	t0 := time.Now()
	cut := false
	for time.Since(t0) < s.cfg.SlowSubTimeout {
		if d.LogCount("event subscriber too slow") > cutsBefore {
			cut = true
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	toCut := time.Since(t0)
	// Keep probing a little after the cut-off: it must not hurt either.
	time.Sleep(500 * time.Millisecond)
	close(stopB)
	wgB.Wait()
	stopGenerator()

	s.Report.Line("slow_subscriber_cut_off", b2f(cut), "bool")
	if !cut {
		s.failf("slow subscriber not cut off within %s", s.cfg.SlowSubTimeout)
		return nil
	}
	s.line("slow_subscriber_time_to_cut_off_s", toCut.Seconds(), "s")

	// Read what the slow subscriber was sent, then its error.
	var got []*types.Event
	var endErr error
	for {
		ev, err := slow.Recv()
		if err != nil {
			endErr = err
			break
		}
		got = append(got, ev)
	}
	st, _ := status.FromError(endErr)
	m := resumeRE.FindStringSubmatch(st.Message())
	resumeOK := st.Code() == codes.Unavailable && m != nil
	var after uint64
	if resumeOK {
		after, _ = strconv.ParseUint(m[1], 10, 64)
	} else {
		s.cfg.Logf("slow subscriber ended with %v, want Unavailable naming the seq to resume after", endErr)
	}
	s.line("slow_subscriber_events_before_cut_off", float64(len(got)), "events")
	if resumeOK && (len(got) == 0 || got[len(got)-1].Seq != after || !contiguous(got)) {
		resumeOK = false
		s.cfg.Logf("slow subscriber got %d events ending at seq %d, not contiguous up to the resume point %d", len(got), lastSeq(got), after)
	}
	// Resume after that seq: the rest, up to the fast subscriber's end,
	// with no gap and no duplicate, identical to what the fast one saw.
	if resumeOK {
		if err := waitStable(func() uint64 { fastMu.Lock(); defer fastMu.Unlock(); return maxKey(fastSeen) }); err != nil {
			return err
		}
		fastMu.Lock()
		end := maxKey(fastSeen)
		fastMu.Unlock()
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		rest, err := harness.Subscribe(rctx, d.Client, &types.EventsRequest{AfterSeq: after}, 1<<16)
		if err != nil {
			cancel()
			return err
		}
		var resumed []*types.Event
		for r := range rest.C {
			resumed = append(resumed, r.Ev)
			if r.Ev.Seq >= end {
				break
			}
		}
		rest.Close()
		cancel()
		all := append(append([]*types.Event{}, got...), resumed...)
		fastMu.Lock()
		for _, ev := range all {
			f, ok := fastSeen[ev.Seq]
			if !ok || f.Type != ev.Type || f.Id != ev.Id {
				resumeOK = false
			}
		}
		fastMu.Unlock()
		if !contiguous(all) || lastSeq(all) != end {
			resumeOK = false
			s.cfg.Logf("slow subscriber + resume: %d events ending at %d, want contiguous up to %d", len(all), lastSeq(all), end)
		}
	}
	s.Report.Line("slow_subscriber_resume_ok", b2f(resumeOK), "bool")
	if !resumeOK {
		s.failf("slow subscriber: no gap-free resume from the cut-off point")
	}
	select {
	case <-fastDone:
		s.failf("the fast subscriber was cut off too: %v", fast.Err())
	default:
	}
	a, b := harness.Percentile(*baseline, 99), harness.Percentile(*loaded, 99)
	s.line("slow_subscriber_loop_p99_baseline_ms", a, "ms")
	s.line("slow_subscriber_loop_p99_ms", b, "ms")
	if b > 3*a+5 {
		s.failf("loop latency p99 %.2f ms with the slow subscriber, %.2f ms without", b, a)
	}
	return nil
}

func contiguous(evs []*types.Event) bool {
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq != evs[i-1].Seq+1 {
			return false
		}
	}
	return true
}

func lastSeq(evs []*types.Event) uint64 {
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].Seq
}

func maxKey(m map[uint64]*types.Event) uint64 {
	var k uint64
	for s := range m {
		k = max(k, s)
	}
	return k
}

// waitStable waits until f returns the same value for 300 ms.
func waitStable(f func() uint64) error {
	deadline := time.Now().Add(30 * time.Second)
	last, since := f(), time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		if v := f(); v != last {
			last, since = v, time.Now()
		} else if time.Since(since) > 300*time.Millisecond {
			return nil
		}
	}
	return fmt.Errorf("events still arriving after 30 s")
}
