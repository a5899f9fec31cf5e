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

// slowSubBuffer is the daemon's --subscriber-buffer for this check, and
// slowSubEventBound how many events may be published after a subscriber
// that never reads attached before it must have been cut off: its buffer
// plus what the gRPC windows and the server's write buffers hold (some
// 3,000 events of this size were seen with the default buffer), with room.
const (
	slowSubBuffer     = 64
	slowSubEventBound = 4096
)

// slowSubscriber attaches, under a steady event load, a subscriber that
// never reads (its own connection, with gRPC's smallest flow-control
// windows so the daemon cannot park much in transport buffers). The daemon
// must cut it off with an error naming the seq to resume after; the events
// it got plus a resume from that seq must be exactly the stream a fast
// subscriber saw; and the loop's latency (a Signal-0 task every 5 ms) must
// not suffer meanwhile, compared with the same load before it attached.
func (s *Suite) slowSubscriber() error {
	// A small per-subscriber buffer: the behaviour is the same as with
	// v0.2.9's 2048, reached after fewer events of a runc-bound source.
	d, bundle, err := s.startWithBundle("slowsub-sleep", "slowsub", "--subscriber-buffer", strconv.Itoa(slowSubBuffer))
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

	// Phase A: the load alone (phase C below is the same, after the cut-off).
	phase := 3 * time.Second
	stopA := make(chan struct{})
	var wgA sync.WaitGroup
	baseline := harness.ProbeLoop(d, ids[0], stopA, &wgA)
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
	loaded := harness.ProbeLoop(d, ids[0], stopB, &wgB)
	// The cut-off must come once the subscriber's buffer (slowSubBuffer)
	// and what the transport holds are full: it is awaited by events
	// published, not by time, since a loaded machine pauses and resumes
	// containers (the event source) several times slower.
	fastCount := func() int { fastMu.Lock(); defer fastMu.Unlock(); return len(fastSeen) }
	seenAtAttach := fastCount()
	t0 := time.Now()
	cut := false
	for time.Since(t0) < s.cfg.SlowSubTimeout && fastCount()-seenAtAttach < slowSubEventBound {
		if d.LogCount("event subscriber too slow") > cutsBefore {
			cut = true
			break
		}
		time.Sleep(50 * time.Millisecond) // polls the daemon's log: no event to await
	}
	toCut := time.Since(t0)
	s.Report.Line("slow_subscriber_cut_off", b2f(cut), "bool")
	if !cut {
		close(stopB)
		wgB.Wait()
		s.failf("slow subscriber not cut off after %d events published in %s (bound %d events, or %s)",
			fastCount()-seenAtAttach, toCut.Round(time.Millisecond), slowSubEventBound, s.cfg.SlowSubTimeout)
		return nil
	}
	s.line("slow_subscriber_time_to_cut_off_s", toCut.Seconds(), "s")

	// The client reads what it was sent, then the error, and resumes at
	// once, as a client would: the journal keeps only --retain-count (500)
	// events, so the resume point must be taken up while it is retained.
	got, endErr := drain(slow)
	st, _ := status.FromError(endErr)
	m := resumeRE.FindStringSubmatch(st.Message())
	resumeOK := st.Code() == codes.Unavailable && m != nil
	var resumeSeq uint64
	if resumeOK {
		resumeSeq, _ = strconv.ParseUint(m[1], 10, 64)
	} else {
		s.cfg.Logf("slow subscriber ended with %v, want Unavailable naming the seq to resume after", endErr)
	}
	s.line("slow_subscriber_events_before_cut_off", float64(len(got)), "events")
	if resumeOK && (len(got) == 0 || got[len(got)-1].Seq != resumeSeq || !contiguous(got)) {
		resumeOK = false
		s.cfg.Logf("slow subscriber got %d events ending at seq %d, not contiguous up to the resume point %d", len(got), lastSeq(got), resumeSeq)
	}
	var rest *harness.Stream
	if resumeOK {
		if rest, err = harness.Subscribe(ctx, d.Client, &types.EventsRequest{AfterSeq: resumeSeq}, 1<<20); err != nil {
			return err
		}
		defer rest.Close()
	}
	// Keep probing a little after the cut-off: it must not hurt either.
	time.Sleep(500 * time.Millisecond)
	close(stopB)
	wgB.Wait()

	// Phase C: the load alone again; with phase A it is the baseline, so a
	// change of background load during B cannot pass for an effect.
	stopC := make(chan struct{})
	var wgC sync.WaitGroup
	after := harness.ProbeLoop(d, ids[0], stopC, &wgC)
	time.Sleep(phase)
	close(stopC)
	wgC.Wait()
	stopGenerator()
	*baseline = append(*baseline, *after...)

	// The resumed stream, up to the fast subscriber's end, must continue
	// the slow one with no gap and no duplicate, identical to what the
	// fast one saw.
	if resumeOK {
		if err := waitStable(func() uint64 { fastMu.Lock(); defer fastMu.Unlock(); return maxKey(fastSeen) }); err != nil {
			return err
		}
		fastMu.Lock()
		end := maxKey(fastSeen)
		fastMu.Unlock()
		var resumed []*types.Event
		timeout := time.After(30 * time.Second)
	read:
		for {
			select {
			case r, ok := <-rest.C:
				if !ok {
					s.cfg.Logf("resumed stream ended: %v", rest.Err())
					break read
				}
				resumed = append(resumed, r.Ev)
				if r.Ev.Seq >= end {
					break read
				}
			case <-timeout:
				break read
			}
		}
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
			first := uint64(0)
			if len(resumed) > 0 {
				first = resumed[0].Seq
			}
			s.cfg.Logf("slow subscriber + resume: %d events ending at %d (resumed from %d after %d), want contiguous up to %d",
				len(all), lastSeq(all), first, resumeSeq, end)
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
	if b > 4*a+20 { // generous: the two phases cannot have the same background load
		s.failf("loop latency p99 %.2f ms with the slow subscriber, %.2f ms without", b, a)
	}
	return nil
}

// drain reads a stream to its end: the events, then the error that ended it.
func drain(st types.API_EventsClient) ([]*types.Event, error) {
	var out []*types.Event
	for {
		ev, err := st.Recv()
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
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
