package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/integration/fixture"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestCRIExitLatency measures how long after its reap (the shim's
// finished_at) a container's exit reaches the 0.2 API's Events
// subscribers, GetContainerEvents (STOPPED) and ContainerStatus (EXITED),
// and asserts the property that makes them agree: an exit is applied to
// the loop's objects before it is published, so once a 0.2 subscriber has
// it, ContainerStatus already says EXITED (asked right then, no wait), and
// the CRI's stream, which is fed by the same publish, has it within a few
// milliseconds. CRIEXITLAT_N sets the number of exits (default 20).
//
// The figures (p50/p99 of each, in ms) are logged: `go test -v -run
// TestCRIExitLatency ./integration/e2e` is the measuring program.
func TestCRIExitLatency(t *testing.T) {
	t.Parallel()
	n := 20
	if v, err := strconv.Atoi(os.Getenv("CRIEXITLAT_N")); err == nil && v > 0 {
		n = v
	}
	e := newCRIEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ref := e.pushTestinit(t, "e2e/exitlat:1")
	if _, err := e.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
		t.Fatal(err)
	}
	run, err := e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: e.podConfig(t, "exitlat")})
	if err != nil {
		t.Fatal(err)
	}
	pod := run.PodSandboxId

	// Each stream's receipt of an exit, stamped by a reader of its own.
	var mu sync.Mutex
	apiAt, criAt, reapAt := map[string]time.Time{}, map[string]time.Time{}, map[string]time.Time{}
	apiCh := map[string]chan struct{}{}
	api, err := e.d.Client.Events(ctx, &types.EventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.Header(); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			ev, err := api.Recv()
			if err != nil {
				return
			}
			if ev.Type != "exit" || ev.Pid != "init" {
				continue
			}
			now := time.Now()
			mu.Lock()
			if _, ok := apiAt[ev.Id]; !ok {
				apiAt[ev.Id], reapAt[ev.Id] = now, ev.ExitedAt.AsTime()
				if ch, ok := apiCh[ev.Id]; ok {
					close(ch)
				}
			}
			mu.Unlock()
		}
	}()
	cri, err := e.rt.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			ev, err := cri.Recv()
			if err != nil {
				return
			}
			if ev.ContainerEventType != runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT {
				continue
			}
			now := time.Now()
			mu.Lock()
			if _, ok := criAt[ev.ContainerId]; !ok {
				criAt[ev.ContainerId] = now
			}
			mu.Unlock()
		}
	}()

	var apiMs, criMs, statusMs, criMinusAPI, statusMinusAPI, plainMs []float64
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	for i := range n {
		cr, err := e.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: pod, SandboxConfig: e.podConfig(t, "exitlat"),
			Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: fmt.Sprintf("c%d", i)},
				Image: &runtimeapi.ImageSpec{Image: ref}, Args: []string{"echo", "exiting", "--", "sleep", "30ms", "--", "exit", "3"}}})
		if err != nil {
			t.Fatal(err)
		}
		id := cr.ContainerId
		got := make(chan struct{})
		mu.Lock()
		apiCh[id] = got
		mu.Unlock()
		if _, err := e.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-got:
		case <-time.After(eventWait):
			t.Fatalf("container %d: no exit on the 0.2 API within %v", i, eventWait)
		}
		// Asked as soon as the 0.2 subscriber has the exit: it must show.
		st, err := e.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
		statusSeen := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		if st.Status.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.Status.ExitCode != 3 {
			t.Fatalf("container %d: ContainerStatus right after the 0.2 API's exit: %v %d, want EXITED 3", i, st.Status.State, st.Status.ExitCode)
		}
		var criSeen time.Time
		for deadline := time.Now().Add(eventWait); ; {
			mu.Lock()
			criSeen = criAt[id]
			mu.Unlock()
			if !criSeen.IsZero() {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("container %d: no STOPPED event within %v of the 0.2 API's exit", i, eventWait)
			}
			time.Sleep(100 * time.Microsecond) // polling a measurement's stamp; the stamp itself is the reader's
		}
		mu.Lock()
		at := apiAt[id]
		mu.Unlock()
		finished := time.Unix(0, st.Status.FinishedAt)
		apiMs = append(apiMs, ms(at.Sub(finished)))
		criMs = append(criMs, ms(criSeen.Sub(finished)))
		statusMs = append(statusMs, ms(statusSeen.Sub(finished)))
		criMinusAPI = append(criMinusAPI, ms(criSeen.Sub(at)))
		statusMinusAPI = append(statusMinusAPI, ms(statusSeen.Sub(at)))
		if _, err := e.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
			t.Fatal(err)
		}

		// A 0.2 container of the same daemon, the same steps: the figure
		// the CRI's is compared with.
		plain := fmt.Sprintf("exitlat-%s-%d", randHex(4), i)
		got = make(chan struct{})
		mu.Lock()
		apiCh[plain] = got
		mu.Unlock()
		create(t, e.d, plain, fixture.NewBundle(t, fixture.Args("echo", "exiting", "--", "sleep", "30ms", "--", "exit", "3")))
		select {
		case <-got:
		case <-time.After(eventWait):
			t.Fatalf("0.2 container %d: no exit within %v", i, eventWait)
		}
		mu.Lock()
		plainMs = append(plainMs, ms(apiAt[plain].Sub(reapAt[plain])))
		mu.Unlock()
	}
	t.Logf("%d exits of 0.2 containers, ms from the reap to the 0.2 API, p50/p99: %s", n, pcts(plainMs))
	t.Logf("%d exits, ms after finished_at, p50/p99: 0.2 API %s, CRI STOPPED event %s, ContainerStatus (asked at the 0.2 exit) %s",
		n, pcts(apiMs), pcts(criMs), pcts(statusMs))
	t.Logf("ms after the 0.2 API's exit, p50/p99: CRI STOPPED event %s, ContainerStatus EXITED %s", pcts(criMinusAPI), pcts(statusMinusAPI))
	removePod(t, e, pod)
}

// pcts is "p50/p99" of xs.
func pcts(xs []float64) string {
	s := slices.Clone(xs)
	slices.Sort(s)
	at := func(p float64) float64 { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return fmt.Sprintf("%.2f/%.2f", at(0.5), at(0.99))
}
