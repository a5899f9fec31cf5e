package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/integration/fixture"
)

// freeAddr is a loopback address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitSubscribers waits until the daemon's event-subscribers gauge (served
// on --metrics-address) is n: the only outside sign that a live-only
// subscription, which replays nothing, has been registered.
func waitSubscribers(t *testing.T, addr string, n int) {
	t.Helper()
	want := fmt.Sprintf("containerd_event_subscribers %d\n", n)
	deadline := time.Now().Add(eventWait)
	var last string
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			last = string(b)
			if strings.Contains(last, want) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("event-subscribers never reached %d (%v):\n%s", n, err, last)
		}
		time.Sleep(pollEvery) // a gauge has no push: poll it
	}
}

// sameEvents compares events field by field, seq and timestamp included.
func sameEvents(t *testing.T, what string, got, want []*types.Event) {
	t.Helper()
	render := func(evs []*types.Event) string {
		var b strings.Builder
		for _, ev := range evs {
			fmt.Fprintf(&b, "%d %s %s %s %s %d\n", ev.Seq, ev.Timestamp.AsTime().Format(time.RFC3339Nano), ev.Type, ev.Id, ev.Pid, ev.Status)
		}
		return b.String()
	}
	if g, w := render(got), render(want); g != w {
		t.Fatalf("%s:\ngot:\n%swant:\n%s", what, g, w)
	}
}

// TestEvents: live events in publication order; replay strictly after a
// timestamp (resuming from event k gives exactly k+1..., then live, with no
// duplicate); stored-only with an id filter ends with EOF; the afterSeq
// extension; the same journal replayed after a restart.
func TestEvents(t *testing.T) {
	t.Parallel()
	metrics := freeAddr(t)
	d := startDaemon(t, "--metrics-address", metrics)
	a, b := fixture.UniqueID(t)+"-a", fixture.UniqueID(t)+"-b"
	t0 := timestamppb.Now()

	evsA, _ := startAndWait(t, d, a, fixture.NewBundle(t))
	evsA.Close()
	waitSubscribers(t, metrics, 0)

	// Live only: nothing of the past (A's start), then every new event of
	// every container, in publication order.
	live := d.Subscribe(nil)
	waitSubscribers(t, metrics, 1)
	create(t, d, b, fixture.NewBundle(t))
	live.Expect("start-container " + b)
	addProcess(t, d, execReq(a, "e1", "exit", "7"))
	live.Expect("start-process "+a+" e1", "exit "+a+" e1 7")
	for _, st := range []string{"paused", "running"} {
		if _, err := d.Client.UpdateContainer(ctxT(t), &types.UpdateContainerRequest{Id: a, Status: st}); err != nil {
			t.Fatalf("UpdateContainer %s: %v", st, err)
		}
	}
	live.Expect("pause "+a, "resume "+a)
	signal(t, d, b, "init", syscall.SIGKILL)
	live.Expect("exit " + b + " init 137")

	// The journal holds exactly what was published, with strictly
	// increasing seqs and timestamps.
	all := storedSince(t, d, t0, "")
	wantEvents(t, "stored events", all, "start-container "+a, "start-container "+b,
		"start-process "+a+" e1", "exit "+a+" e1 7", "pause "+a, "resume "+a, "exit "+b+" init 137")
	for i := 1; i < len(all); i++ {
		if all[i].Seq <= all[i-1].Seq || !all[i].Timestamp.AsTime().After(all[i-1].Timestamp.AsTime()) {
			t.Fatalf("event %d (seq %d, %v) does not come strictly after event %d (seq %d, %v)", i,
				all[i].Seq, all[i].Timestamp.AsTime(), i-1, all[i-1].Seq, all[i-1].Timestamp.AsTime())
		}
	}
	// Timestamp{0,0} (1970) replays everything.
	sameEvents(t, "replay from 1970", stored(t, d, &types.EventsRequest{Timestamp: &timestamppb.Timestamp{}}), all)

	// Replay strictly after the timestamp (or seq) of event k: exactly k+1...
	for k := range all {
		sameEvents(t, fmt.Sprintf("stored after the timestamp of event %d", k), storedSince(t, d, all[k].Timestamp, ""), all[k+1:])
		sameEvents(t, fmt.Sprintf("stored after the seq of event %d", k), stored(t, d, &types.EventsRequest{AfterSeq: all[k].Seq}), all[k+1:])
	}
	// With an id filter: only that container's events, then EOF.
	var onlyA []*types.Event
	for _, ev := range all {
		if ev.Id == a {
			onlyA = append(onlyA, ev)
		}
	}
	sameEvents(t, "stored-only for "+a, storedSince(t, d, t0, a), onlyA)
	sameEvents(t, "stored-only for "+a+" after seq", stored(t, d, &types.EventsRequest{AfterSeq: all[0].Seq, Id: a}), onlyA[1:])

	// A live subscription resuming from the timestamp of event 2 replays
	// 3..., then follows live without a gap or a duplicate; one resuming by
	// seq does the same.
	const k = 2
	byTime := d.SubscribeAfter(all[k].Timestamp.AsTime(), "")
	bySeq := d.Subscribe(&types.EventsRequest{AfterSeq: all[k].Seq})
	for _, sub := range []*fixture.Events{byTime, bySeq} {
		var got []*types.Event
		for range all[k+1:] {
			got = append(got, sub.Next(eventWait))
		}
		sameEvents(t, "replayed part of a resumed subscription", got, all[k+1:])
	}
	signal(t, d, a, "init", syscall.SIGKILL)
	for _, sub := range []*fixture.Events{byTime, bySeq, live} {
		sub.Expect("exit " + a + " init 137")
	}
	all = storedSince(t, d, t0, "")

	// After a restart the journal replays the same events (seq and
	// timestamp included), and new events continue the sequence.
	d.Stop()
	restart(t, d)
	sameEvents(t, "stored events after a restart", storedSince(t, d, t0, ""), all)
	last := all[len(all)-1]
	resumed := d.SubscribeAfter(last.Timestamp.AsTime(), "")
	c := fixture.UniqueID(t) + "-c"
	create(t, d, c, fixture.NewBundle(t))
	ev := resumed.Expect("start-container " + c)[0]
	if ev.Seq <= last.Seq || !ev.Timestamp.AsTime().After(last.Timestamp.AsTime()) {
		t.Fatalf("first event after the restart: seq %d at %v, last before: seq %d at %v",
			ev.Seq, ev.Timestamp.AsTime(), last.Seq, last.Timestamp.AsTime())
	}
	signal(t, d, c, "init", syscall.SIGKILL)
	resumed.Expect("exit " + c + " init 137")
}
