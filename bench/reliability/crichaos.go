package reliability

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/evjournal/containerd/bench/internal/harness"
	"github.com/evjournal/containerd/integration/fixture"
)

// criChaos is pod churn as kubelet makes it (run a pod, create and start
// its containers, one of which exits by itself, stop one, stop and remove
// the pod) on a CRI daemon SIGKILLed at random moments and started again.
// The workers go on after a failed call the way kubelet's sync does
// (fixture.Kubelet: look at what the runtime lists, retry what is not
// done). After each restart, with no call under way, the invariants must
// hold (fixture.CRINode.Check); at the end every pod is removed and
// nothing may be left (CheckEmpty).
func (s *Suite) criChaos() error {
	n, err := s.startCRINode("cri-chaos")
	if err != nil {
		return err
	}
	seed := s.cfg.Seed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	s.cfg.Logf("cri-chaos: seed %d", seed)
	c := &criChaosRun{s: s, n: n, kl: fixture.Kubelet{RT: n.rt}, rng: rand.New(rand.NewSource(seed)), errs: map[string]int{}}
	return c.run()
}

type criChaosRun struct {
	s  *Suite
	n  *criNode
	kl fixture.Kubelet

	// gate: workers hold it for reading around each call; a restart and
	// the check after it hold it for writing (no call under way).
	gate sync.RWMutex

	mu   sync.Mutex // guards what follows
	rng  *rand.Rand
	errs map[string]int // calls refused with another code than a lost daemon's, by code
	// Findings and what the run did.
	kills, pods, started, stuck, violations int
}

// Figures of the run: how long a step may take to go through, retries
// included, before the worker counts it stuck; how long the invariants
// may stay broken after a restart (exits on their way).
const (
	criStepLimit   = 90 * time.Second
	criSettleLimit = 15 * time.Second
)

func (c *criChaosRun) intn(n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rng.Intn(n)
}

func (c *criChaosRun) run() error {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	cycle := make([]int, c.s.cfg.CRIWorkers) // each worker's pod count, its own
	harness.Repeat(c.s.cfg.CRIWorkers, stop, &wg, func(w int) bool {
		cycle[w]++
		return c.podCycle(stop, w, cycle[w]) == nil
	})
	t0 := time.Now()
	var runErr error
	for c.kills < c.s.cfg.CRIKills && time.Since(t0) < c.s.cfg.CRITime {
		time.Sleep(time.Duration(300+c.intn(2200)) * time.Millisecond)
		if runErr = c.crashAndRestart(); runErr != nil {
			break
		}
	}
	close(stop)
	wg.Wait()
	if runErr == nil {
		runErr = c.finish()
	}
	c.report()
	return runErr
}

func (c *criChaosRun) report() {
	c.s.Report.Line("cri_daemon_kills", float64(c.kills), "kills")
	c.s.line("cri_pods_run", float64(c.pods), "pods")
	c.s.line("cri_containers_started", float64(c.started), "containers")
	var refused []string
	total := 0
	for code, k := range c.errs {
		refused = append(refused, fmt.Sprintf("%s %d", code, k))
		total += k
	}
	c.s.line("cri_calls_refused", float64(total), "calls")
	if total > 0 {
		c.s.cfg.Logf("cri-chaos: calls refused (retried): %s", strings.Join(refused, ", "))
	}
	c.s.zero("cri_invariant_violations", c.violations, "restarts")
	c.s.zero("cri_stuck_steps", c.stuck, "steps")
}

// crashAndRestart SIGKILLs the daemon wherever its calls are, starts it
// again once the workers' calls have failed, and checks the invariants
// before letting them go on.
func (c *criChaosRun) crashAndRestart() error {
	if err := c.n.d.Kill(); err != nil {
		return err
	}
	c.kills++
	c.gate.Lock()
	defer c.gate.Unlock()
	if err := c.n.restart(); err != nil {
		return fmt.Errorf("restart %d: %w", c.kills, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*criSettleLimit)
	defer cancel()
	if bad := fixture.WaitChecked(ctx, criSettleLimit, c.n.check.Check); len(bad) > 0 {
		c.violations++
		c.s.cfg.Logf("cri-chaos: after restart %d the invariants do not hold:\n  %s", c.kills, strings.Join(bad, "\n  "))
		c.logAbout(bad)
	}
	return nil
}

var idRE = regexp.MustCompile(`[0-9a-f]{64}`)

// logAbout logs what the daemon said of the ids in the findings, across
// its starts: the run's dir, its log with it, is gone at the end.
func (c *criChaosRun) logAbout(findings []string) {
	for _, id := range slices.Compact(slices.Sorted(slices.Values(idRE.FindAllString(strings.Join(findings, " "), -1)))) {
		c.s.cfg.Logf("cri-chaos: the daemon's log lines on %s:\n%s", id, strings.Join(c.n.d.LogLines(id, 60), "\n"))
	}
}

// finish removes every pod as kubelet would and checks nothing is left.
func (c *criChaosRun) finish() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.kl.RemoveAll(ctx); err != nil {
		return fmt.Errorf("removing every pod at the end: %w", err)
	}
	bad := fixture.WaitChecked(ctx, 30*time.Second, c.n.check.CheckEmpty)
	c.s.zero("cri_leftovers", len(bad), "items")
	if len(bad) > 0 {
		c.s.cfg.Logf("cri-chaos: left after every pod's removal:\n  %s", strings.Join(bad, "\n  "))
		c.logAbout(bad)
	}
	return nil
}

// pod is one pod of a worker's cycle, as kubelet knows it.
type pod struct {
	uid, name string
	hostPort  int32
	logDir    string
	parent    string
}

func (p pod) config(attempt uint32) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: p.name, Namespace: "rel", Uid: p.uid, Attempt: attempt},
		Hostname:     p.name,
		LogDirectory: p.logDir,
		Linux:        &runtimeapi.LinuxPodSandboxConfig{CgroupParent: p.parent},
		PortMappings: []*runtimeapi.PortMapping{{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 8080, HostPort: p.hostPort}},
	}
}

// podCycle is one pod's life: run, a sleeping container kept running, a
// job that exits by itself, sometimes a stop, then the pod's removal.
// Each step is retried until done (or stuck); stop ends the cycle early.
func (c *criChaosRun) podCycle(stop <-chan struct{}, w, n int) error {
	name := fmt.Sprintf("w%d-%d", w, n)
	p := pod{uid: c.s.env.Tag + "-" + name, name: name, hostPort: int32(30000 + 100*w + n%100),
		logDir: filepath.Join(c.n.logDir, name), parent: c.n.podParent}
	var podID string
	err := c.retry(stop, "run the pod", func(ctx context.Context) (err error) {
		podID, err = c.kl.EnsurePod(ctx, p.uid, p.config)
		return err
	})
	if err == nil {
		c.count(&c.pods)
		err = c.containers(stop, podID, p)
	}
	if err == errStopped {
		return nil // the pod is removed at the end with the others
	}
	return c.retry(stop, "remove the pod", func(ctx context.Context) error { return c.removePod(ctx, p.uid) })
}

var errStopped = fmt.Errorf("the run is over")

// containers runs the pod's containers and maybe stops the sleeper.
func (c *criChaosRun) containers(stop <-chan struct{}, podID string, p pod) error {
	var sleeper string
	err := c.retry(stop, "run the sleeper", func(ctx context.Context) (err error) {
		sleeper, err = c.kl.EnsureRunning(ctx, podID, p.config(0), "sleeper", c.containerConfig("sleeper", "sleep", "forever"))
		return err
	})
	if err != nil {
		return err
	}
	c.count(&c.started)
	job := c.containerConfig("job", "sleep", fmt.Sprintf("%dms", 50+c.intn(800)), "--", "exit", "3")
	if err := c.retry(stop, "run the job", func(ctx context.Context) error { return c.startOnce(ctx, podID, p.config(0), job) }); err != nil {
		return err
	}
	c.count(&c.started)
	if c.intn(2) == 0 {
		return c.retry(stop, "stop the sleeper", func(ctx context.Context) error {
			_, err := c.n.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: sleeper, Timeout: 1})
			return err
		})
	}
	return nil
}

func (c *criChaosRun) containerConfig(name string, args ...string) fixture.ContainerConfig {
	return func(attempt uint32) *runtimeapi.ContainerConfig {
		return &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name, Attempt: attempt},
			Image: &runtimeapi.ImageSpec{Image: c.n.image}, Args: args, LogPath: fmt.Sprintf("%s_%d.log", name, attempt)}
	}
}

// startOnce runs a container that is to run once (restartPolicy Never): a
// created one is started, one that runs or ran is left alone.
func (c *criChaosRun) startOnce(ctx context.Context, podID string, pod *runtimeapi.PodSandboxConfig, cfg fixture.ContainerConfig) error {
	l, err := c.n.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: podID}})
	if err != nil {
		return err
	}
	for _, x := range l.Containers {
		if x.Metadata.GetName() != cfg(0).Metadata.Name {
			continue
		}
		if x.State == runtimeapi.ContainerState_CONTAINER_CREATED {
			_, err := c.n.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: x.Id})
			return err
		}
		return nil
	}
	_, err = c.kl.CreateAndStart(ctx, podID, pod, cfg(0))
	return err
}

// removePod stops and removes every pod of uid; done once none is listed.
func (c *criChaosRun) removePod(ctx context.Context, uid string) error {
	l, err := c.n.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return err
	}
	for _, x := range l.Items {
		if x.Metadata.GetUid() != uid {
			continue
		}
		if err := c.kl.RemovePod(ctx, x.Id); err != nil {
			return err
		}
	}
	return nil
}

// retry runs step until it succeeds, as kubelet's next sync would: a call
// lost with the daemon is retried at once, one refused is counted by code
// and retried a little later. A step that takes over criStepLimit is
// stuck: counted, and the cycle given up.
func (c *criChaosRun) retry(stop <-chan struct{}, what string, step func(context.Context) error) error {
	t0 := time.Now()
	for {
		select {
		case <-stop:
			return errStopped
		default:
		}
		c.gate.RLock()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err := step(ctx)
		cancel()
		c.gate.RUnlock()
		if err == nil {
			return nil
		}
		if time.Since(t0) > criStepLimit {
			c.count(&c.stuck)
			c.s.cfg.Logf("cri-chaos: %s: stuck for %s: %v", what, criStepLimit, err)
			return err
		}
		c.noteRefusal(what, err)
		time.Sleep(time.Duration(20+c.intn(100)) * time.Millisecond)
	}
}

// noteRefusal counts an error that is not the daemon's death.
func (c *criChaosRun) noteRefusal(what string, err error) {
	switch status.Code(err) {
	case codes.Unavailable, codes.Canceled, codes.DeadlineExceeded:
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	key := status.Code(err).String()
	c.errs[key]++
	if c.errs[key] <= 3 {
		c.s.cfg.Logf("cri-chaos: %s refused (retried): %v", what, err)
	}
}

func (c *criChaosRun) count(n *int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	*n++
}
