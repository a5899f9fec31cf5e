package reliability

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/evjournal/containerd/integration/fixture"
)

// criHostile: a CRI daemon in a memory-limited cgroup takes, for
// HostileTime, all at once, what a hostile registry, hostile images and a
// hostile pod throw at it: pulls of what is too big or lies (an 80 MB
// manifest, a config declared 900 MiB, a 1 GiB gzip bomb, a 512 MiB zstd
// window, nested indexes), creates from images whose /etc/passwd is a FIFO
// or whose /etc/group is /dev/urandom, and ExecSyncs of 40 MB of output.
// Meanwhile a well-behaved pod is probed (an ExecSync every 100 ms) and
// must answer each time. The daemon must never be killed (the cgroup's
// OOM kills 0, the same pid at the end), every hostile call must be
// answered as documented, and once every pod is removed nothing is left.
func (s *Suite) criHostile() error {
	n, err := s.startCRINode("cri-hostile")
	if err != nil {
		return err
	}
	h := &hostileRun{s: s, n: n, wrong: map[string]int{}}
	if err := h.serve(); err != nil {
		return err
	}
	// The daemon pulls from the hostile registry too, and lives in the
	// cgroup from its start: what it holds at its peak is under the limit.
	n.d.Extra = append(n.d.Extra, "--insecure-registry", h.reg.Host)
	if err := n.d.Kill(); err != nil {
		return err
	}
	if h.cg, err = newMemCgroup(s.env, "hostile-daemon", hostileMemLimit); err != nil {
		return err
	}
	if err := n.d.Spawn(); err != nil {
		return err
	}
	if err := h.cg.add(n.d.Pid()); err != nil {
		return err
	}
	if err := n.restartServing(); err != nil {
		return err
	}
	err = h.run()
	if err != nil || h.left > 0 {
		h.keepLog()
	}
	return err
}

// keepLog copies the daemon's log out of the run's dir (removed at the
// end) so that a failed run can be read afterwards.
func (h *hostileRun) keepLog() {
	b, err := os.ReadFile(h.n.d.LogPath)
	if err != nil {
		return
	}
	f, err := os.CreateTemp("", "ctrd-rel-cri-hostile-*.log")
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Write(b); err == nil {
		h.s.cfg.Logf("cri-hostile: the daemon's log is kept in %s", f.Name())
	}
}

// hostileMemLimit is the daemon's cgroup limit (its shims included): what
// a pull costs is bounded to about 40 MiB, the unpacks to 4 × 34 MiB, the
// ExecSync output held to --exec-sync-output-budget (64 MiB).
const hostileMemLimit = 512 << 20

type hostileRun struct {
	s   *Suite
	n   *criNode
	cg  *memCgroup
	reg *fixture.HostileRegistry

	pulls   []hostileCall // refs below reg.Host, what they must answer
	creates []hostileCall // images whose create must be refused
	podCfg  *runtimeapi.PodSandboxConfig
	podID   string
	flooder string // a container of the hostile pod, for the ExecSync floods

	mu                           sync.Mutex     // guards what follows
	wrong                        map[string]int // hostile calls answered otherwise than documented, by what
	calls, probes, probeFailures int
	probeMax                     time.Duration
	left                         int // leftovers after every pod's removal
}

// hostileCall is a call and the code it must answer.
type hostileCall struct {
	ref  string
	code codes.Code
}

func (h *hostileRun) run() error {
	pid := h.n.d.Pid()
	if err := h.startPods(); err != nil {
		return err
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, w := range []func(<-chan struct{}){h.pullLoop, h.pullLoop, h.pullLoop, h.createLoop("etc-a"), h.createLoop("etc-b"), h.floodLoop, h.floodLoop, h.floodLoop} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w(stop)
		}()
	}
	probeErr := h.probeLoop(time.Now().Add(h.s.cfg.HostileTime))
	close(stop)
	wg.Wait()
	h.report(pid)
	if probeErr != nil {
		return probeErr
	}
	return h.finish()
}

// report gives the run's figures; those that must be 0 fail the suite.
func (h *hostileRun) report(pid int) {
	s := h.s
	kills, err := h.cg.oomKills()
	if err != nil {
		s.failf("cri-hostile: %v", err)
	}
	peak, _ := h.cg.peak()
	killed := 0
	if !h.n.d.Alive() || h.n.d.Pid() != pid {
		killed = 1
	}
	s.line("cri_hostile_calls", float64(h.calls), "calls")
	s.line("cri_hostile_peak_mib", float64(peak>>20), "MiB")
	s.line("cri_hostile_probe_max_ms", float64(h.probeMax.Milliseconds()), "ms")
	s.zero("cri_hostile_daemon_killed", killed, "")
	s.zero("cri_hostile_oom_kills", kills, "")
	s.zero("cri_hostile_probe_failures", h.probeFailures, "probes")
	wrong := 0
	for what, k := range h.wrong {
		s.cfg.Logf("cri-hostile: %d answers not as documented: %s", k, what)
		wrong += k
	}
	s.zero("cri_hostile_wrong_answers", wrong, "calls")
}

// finish removes every pod and image and checks that nothing is left.
func (h *hostileRun) finish() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A create whose caller gave up (its 20 s deadline) may still be under
	// way in the daemon, and commit after the pods were listed: what it
	// made is removed on the next round, as kubelet's GC would. A rootfs
	// that never goes is still a failure (the rounds are bounded).
	if err := h.removeEverything(ctx); err != nil {
		return err
	}
	bad := fixture.WaitChecked(ctx, 30*time.Second, h.n.check.CheckEmpty)
	bad = append(bad, leftIn(h.n.check.Root+"/images/tmp")...)
	bad = append(bad, leftIn(h.n.check.Root+"/images/layers")...)
	h.left = len(bad)
	h.s.zero("cri_hostile_leftovers", len(bad), "items")
	if len(bad) > 0 {
		h.s.cfg.Logf("cri-hostile: left after every pod's removal:\n  %s", strings.Join(bad, "\n  "))
	}
	return nil
}

// note counts a hostile call and whether its answer was the documented one.
func (h *hostileRun) note(what string, err error, want codes.Code) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	if got := status.Code(err); got != want {
		h.wrong[fmt.Sprintf("%s: %v (want %v)", what, got, want)]++
	}
}

// pullLoop pulls hostile images until stop, one at a time.
func (h *hostileRun) pullLoop(stop <-chan struct{}) {
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	for !closed(stop) {
		p := h.pulls[rng.Intn(len(h.pulls))]
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		_, err := h.n.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: h.reg.Host + "/" + p.ref}})
		cancel()
		h.note("pull "+p.ref, err, p.code)
	}
}

// createLoop makes a worker that creates containers named name from the
// images with hostile /etc files.
// removeEverything removes every pod, then every image, in rounds while an
// image is still in use (FailedPrecondition), for at most 30 s.
func (h *hostileRun) removeEverything(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := (fixture.Kubelet{RT: h.n.rt}).RemoveAll(ctx); err != nil {
			return fmt.Errorf("removing every pod at the end: %w", err)
		}
		err := h.removeImages(ctx)
		if status.Code(err) != codes.FailedPrecondition || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond) // no event says a create the client left has ended
	}
}

func (h *hostileRun) removeImages(ctx context.Context) error {
	imgs, err := h.n.img.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		return err
	}
	for _, img := range imgs.Images {
		if _, err := h.n.img.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: img.Id}}); err != nil {
			return fmt.Errorf("remove image %s: %w", img.Id, err)
		}
	}
	return nil
}

func (h *hostileRun) createLoop(name string) func(<-chan struct{}) {
	return func(stop <-chan struct{}) {
		for i := 0; !closed(stop); i++ {
			c := h.creates[i%len(h.creates)]
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			_, err := h.n.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: h.podID, SandboxConfig: h.podCfg,
				Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name, Attempt: uint32(i)},
					Image: &runtimeapi.ImageSpec{Image: h.reg.Host + "/" + c.ref}}})
			cancel()
			h.note("create from "+c.ref, err, c.code)
		}
	}
}

// floodLoop runs ExecSyncs of 40 MB of output; each reply must come, cut
// to what kubelet reads.
func (h *hostileRun) floodLoop(stop <-chan struct{}) {
	for !closed(stop) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		r, err := h.n.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: h.flooder, Cmd: []string{"/testinit", "fill", "41943040", "1"}, Timeout: 50},
			grpc.MaxCallRecvMsgSize(16<<20))
		cancel()
		if err == nil && r.ExitCode != 0 {
			err = fmt.Errorf("exit %d", r.ExitCode)
		}
		h.note("ExecSync of 40 MB", err, codes.OK)
	}
}

// probeLoop probes the well-behaved pod every 100 ms until the deadline:
// the load the probes measure, not a wait.
func (h *hostileRun) probeLoop(deadline time.Time) error {
	cs, err := h.n.rt.ListContainers(context.Background(), &runtimeapi.ListContainersRequest{
		Filter: &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"rel": "good"}}})
	if err != nil || len(cs.Containers) != 1 {
		return fmt.Errorf("the well-behaved container: %v %v", cs, err)
	}
	good := cs.Containers[0].Id
	for time.Now().Before(deadline) {
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		r, err := h.n.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: good, Cmd: []string{"/testinit", "echo", "ok"}, Timeout: 10})
		cancel()
		h.mu.Lock()
		h.probes++
		h.probeMax = max(h.probeMax, time.Since(t0))
		if err != nil || string(r.Stdout) != "ok\n" {
			h.probeFailures++
			h.s.cfg.Logf("cri-hostile: probe of the well-behaved pod: %q %v", r.GetStdout(), err)
		}
		h.mu.Unlock()
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
