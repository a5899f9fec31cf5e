package e2e

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/integration/fixture"
)

// TestJournalDiskFull runs the daemon with --journal-dir on a 256 KiB tmpfs
// and fills it: creates are answered Unavailable naming the journal dir and
// ENOSPC, health stays SERVING, the degraded gauge is 1; an exit that
// happens meanwhile is published only once space is freed, without a
// restart, and a replay then holds exactly what was published live.
func TestJournalDiskFull(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	d := startDaemonWith(t, func(d *fixture.Daemon) {
		if err := os.MkdirAll(d.JournalDir, 0o700); err != nil {
			t.Fatal(err)
		}
		fixture.MountTmpfs(t, d.JournalDir, "256k")
		d.Args = append(d.Args, "--metrics-address", addr)
	})
	all := d.SubscribeAfter(time.Unix(0, 0), "")
	defer all.Close()
	first := fixture.UniqueID(t)
	create(t, d, first, fixture.NewBundle(t, fixture.Args("sleep", "forever")))
	live := []*types.Event{all.Next(20 * time.Second)}

	filler := fixture.FillFS(t, d.JournalDir)
	var refusal error
	for i := 0; refusal == nil && i < 100; i++ {
		id := first + "-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		_, err := d.Client.CreateContainer(ctxT(t), &types.CreateContainerRequest{Id: id,
			BundlePath: fixture.NewBundle(t, fixture.Args("sleep", "forever")).Path})
		if err != nil {
			refusal = err
			break
		}
		live = append(live, all.Next(20*time.Second))
	}
	if refusal == nil {
		t.Fatal("the journal never filled up")
	}
	st, _ := status.FromError(refusal)
	if st.Code() != codes.Unavailable || !strings.Contains(st.Message(), d.JournalDir) || !strings.Contains(st.Message(), "ENOSPC") {
		t.Fatalf("create on a full journal: %v; want Unavailable naming %s and ENOSPC", refusal, d.JournalDir)
	}
	conn, err := grpc.NewClient("unix://"+d.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc, err := healthpb.NewHealthClient(conn).Check(ctxT(t), &healthpb.HealthCheckRequest{})
	if err != nil || hc.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health while the journal is full: %v, %v; want SERVING", hc, err)
	}
	if v := gauge(t, addr, "containerd_journal_degraded"); v != 1 {
		t.Fatalf("containerd_journal_degraded = %v while the journal is full", v)
	}
	signal(t, d, first, "init", syscall.SIGKILL)
	for gauge(t, addr, "containerd_journal_held_events") < 2 { // the refused create's start, first's exit
		time.Sleep(20 * time.Millisecond)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	// The held events: the refused create's start-container and exit (it
	// was killed: its client was told it failed) and first's exit.
	for i := 0; i < 3; i++ {
		live = append(live, all.Next(20*time.Second))
	}
	exits := 0
	for _, ev := range live {
		if ev.GetType() == "exit" && ev.GetId() == first {
			exits++
		}
	}
	if exits != 1 {
		t.Fatalf("first's exit published %d times: %v", exits, describeAll(live))
	}
	stored := storedSince(t, d, &timestamppb.Timestamp{}, "")
	if len(stored) < len(live) {
		t.Fatalf("replay has %d events, %d were published live", len(stored), len(live))
	}
	for i, ev := range live {
		if ev.GetSeq() == 0 || ev.GetSeq() != stored[i].GetSeq() || fixture.Describe(ev) != fixture.Describe(stored[i]) {
			t.Fatalf("event %d: live %v, replayed %v", i, ev, stored[i])
		}
	}
	// Every container still running is stopped by the test.
	infos, err := d.Client.State(ctxT(t), &types.StateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range infos.GetContainers() {
		signal(t, d, c.GetId(), "init", syscall.SIGKILL)
	}
}

// gauge scrapes one gauge's value.
func gauge(t *testing.T, addr, name string) float64 {
	t.Helper()
	var v float64
	for _, m := range scrapeMetrics(t, addr)[name].GetMetric() {
		v += m.GetGauge().GetValue()
	}
	return v
}
