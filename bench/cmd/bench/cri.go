package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/bench/internal/harness"
	"github.com/evjournal/containerd/integration/fixture"
)

// The cri group: the daemon's CRI (--cri-listen) beside containerd 2.x's
// CRI plugin (harness.Peer), both on private dirs, the same bin/runc, the
// same CNI plugins (a network each), the same images from one registry of
// the run, timed by the same CRI client, one side after the other in
// alternating order. Every figure is ours ÷ containerd's of this run.

// criSide is one CRI runtime of the group.
type criSide struct {
	name      string // "ours", "containerd"
	rt        runtimeapi.RuntimeServiceClient
	img       runtimeapi.ImageServiceClient
	image     string // the test image, pulled (its id)
	podParent string
	logDir    string
	daemonPid func() int
	shims     func() []harness.Proc
	events    *eventLog // CONTAINER_STOPPED_EVENT receipts, by container id
	apiExits  *eventLog // ours only: the 0.2 API's init exit events, by id
	seq       int       // pod names
	m         criMeasures
}

// criMeasures are one side's measurements, in ms unless said.
type criMeasures struct {
	runPod, createStart, stopRemove []float64
	execSeq, execConcLat            []float64
	execConcPerS                    []float64 // throughput of each round
	exitStatus, exitEvent           []float64 // container's stamp → ContainerStatus EXITED / STOPPED event received
	finishedToStatus                []float64 // ContainerStatus's finished_at → the poll that saw EXITED
	stampToFinished                 []float64 // the stamp → finished_at (the runtime's reap time)
	apiExitPolled, apiExitEvented   []float64 // ours: stamp → the 0.2 API's exit event, same exits
	listCtrStats, listPodStats      []float64
	podsAtOnce, teardown            []float64
	pssKiB, rssKiB, daemonRSSKiB    float64 // with the pods of the first round, daemon + shims + pauses
	shimCount, pauseCount           int     // processes counted
	cpuPercent                      float64 // daemon + shims over the idle window, % of one CPU
	cpuDaemonPercent                float64 // of which the daemon's
	statsFields                     string  // what ListPodSandboxStats reports for a pod
}

type criRun struct {
	b      *bench
	sides  [2]*criSide // ours, containerd
	stamps string
	peer   *harness.Peer
	ours   *harness.CRIDaemon
	// runcExec is the floor of an exec: bare `runc exec -d` of /bin/true in
	// our exec container, until its process has exited (ms).
	runcExec []float64
}

func (b *bench) cri() error {
	r, err := b.startCRI()
	if err != nil {
		return err
	}
	defer r.stop()
	steps := []struct {
		key, name string
		run       func() error
	}{
		{"lifecycle", "pod lifecycle", r.lifecycle},
		{"exec", "ExecSync", r.execSync},
		{"exits", "exits", r.exits},
		{"pods", "50 pods", r.manyPods},
	}
	for _, s := range steps {
		if len(b.criSteps) > 0 && !contains(b.criSteps, s.key) {
			continue
		}
		t0 := time.Now()
		if err := s.run(); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		fmt.Fprintf(os.Stderr, "bench: cri: %s took %s\n", s.name, time.Since(t0).Round(time.Millisecond))
	}
	r.report()
	return nil
}

// startCRI pushes the images, starts both runtimes, pulls the test image
// into each and opens the event streams.
func (b *bench) startCRI() (*criRun, error) {
	env := b.env
	reg := env.NewRegistry()
	body, err := os.ReadFile(env.Bins.Testinit)
	if err != nil {
		return nil, err
	}
	truefiles, err := harness.HostFiles("/bin/true")
	if err != nil {
		return nil, fmt.Errorf("/bin/true for the test image: %w", err)
	}
	image, err := reg.PushImage("bench/testinit:1", v1.Config{Entrypoint: []string{"/testinit"}, Cmd: []string{"sleep", "forever"}},
		append(fixture.TestinitFiles(body), truefiles...)...)
	if err != nil {
		return nil, fmt.Errorf("push the test image: %w", err)
	}
	pause, err := os.ReadFile(env.Bins.Pause)
	if err != nil {
		return nil, err
	}
	pauseImage, err := reg.PushImage("bench/pause:1", v1.Config{Entrypoint: []string{"/pause"}},
		fixture.File{Name: "pause", Body: string(pause), Mode: 0o755})
	if err != nil {
		return nil, fmt.Errorf("push the pause image: %w", err)
	}
	r := &criRun{b: b, stamps: env.Path("cri-stamps")}
	if err := os.MkdirAll(r.stamps, 0o777); err != nil {
		return nil, err
	}
	if r.ours, err = env.NewCRIDaemon("cri-ours", reg); err != nil {
		return nil, err
	}
	if b.versus != nil {
		if err := r.startVersus(reg, image); err != nil {
			return nil, err
		}
		return r, nil
	}
	peerDir, err := b.resolvePeerDir()
	if err != nil {
		return nil, err
	}
	if r.peer, err = env.NewPeer("cri-c2", peerDir, reg, pauseImage); err != nil {
		return nil, err
	}
	b.peerVersion = r.peer.Version
	if err := r.ours.Start(); err != nil {
		return nil, err
	}
	if err := r.peer.Start(); err != nil {
		return nil, err
	}
	ours := r.oursSide()
	peer := &criSide{name: "containerd", rt: r.peer.RT, img: r.peer.Img, podParent: r.peer.PodParent, logDir: r.peer.LogDir,
		daemonPid: r.peer.Pid, shims: r.peer.Shims}
	r.sides = [2]*criSide{ours, peer}
	// containerd pulls its sandbox image at the first RunPodSandbox: not
	// in a timing.
	if _, err := harness.Pull(peer.img, pauseImage); err != nil {
		return nil, fmt.Errorf("containerd: %w", err)
	}
	return r, r.prepareSides(image)
}

// resolvePeerDir is the dir of containerd's binaries (-peer, or the one
// `make bench-peer` builds), made absolute: containerd is given its shim's
// path, and its shims are found by their executable's.
func (b *bench) resolvePeerDir() (string, error) {
	dir := b.peerDir
	if dir == "" {
		d, err := harness.PeerDir()
		if err != nil {
			return "", err
		}
		dir = d
	}
	return filepath.Abs(dir)
}

// oursSide is the side of bin/'s daemon, started.
func (r *criRun) oursSide() *criSide {
	env := r.b.env
	return &criSide{name: "ours", rt: r.ours.RT, img: r.ours.Img, podParent: r.ours.PodParent, logDir: r.ours.LogDir,
		daemonPid: r.ours.Pid, shims: func() []harness.Proc { return append(env.Shims(r.ours.Dir), env.Spares(r.ours.Pid())...) }}
}

// startVersus starts bin/'s daemon and, in containerd's place, a daemon of
// the build given with -versus-ours (an A/B of a change: every ratio then
// reads bin/'s ÷ that build's).
func (r *criRun) startVersus(reg *harness.Registry, image string) error {
	env, v := r.b.env, r.b.versus
	other, err := env.NewCRIDaemon("cri-ours-b", reg)
	if err != nil {
		return err
	}
	other.Binary, other.ShimBinary = v.daemon, v.shim
	r.b.peerVersion = "ours, built as " + v.daemon + " and " + v.shim
	if err := r.ours.Start(); err != nil {
		return err
	}
	if err := other.Start(); err != nil {
		return fmt.Errorf("-versus-ours daemon: %w", err)
	}
	b := &criSide{name: "ours-b", rt: other.RT, img: other.Img, podParent: other.PodParent, logDir: other.LogDir,
		daemonPid: other.Pid, shims: func() []harness.Proc {
			return append(harness.ShimsOf(v.shim, other.Dir), harness.SparesOf(v.shim, other.Pid())...)
		}}
	r.sides = [2]*criSide{r.oursSide(), b}
	return r.prepareSides(image)
}

// prepareSides pulls the test image into both sides and opens their event
// streams (ours also the 0.2 API's).
func (r *criRun) prepareSides(image string) error {
	env := r.b.env
	var err error
	for _, s := range r.sides {
		if s.image, err = harness.Pull(s.img, image); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	for _, s := range r.sides {
		if s.events, err = watchCRIEvents(env, s.rt); err != nil {
			return fmt.Errorf("%s: GetContainerEvents: %w", s.name, err)
		}
	}
	r.sides[0].apiExits, err = watchAPIExits(env, r.ours.Daemon)
	return err
}

// stop removes every pod left (after a failed step) and stops both
// runtimes; Env.Close removes anything they leave.
func (r *criRun) stop() {
	for _, s := range r.sides {
		if s == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		if l, err := s.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err == nil {
			var wg sync.WaitGroup
			for _, p := range l.Items {
				wg.Go(func() { s.stopRemovePod(ctx, p.Id) })
			}
			wg.Wait()
		}
		cancel()
	}
	r.ours.Kill()
	if r.peer != nil {
		r.peer.Destroy()
	}
}

// order is the sides in the order of round i: each goes first every
// other round.
func (r *criRun) order(i int) [2]*criSide {
	if i%2 == 1 {
		return [2]*criSide{r.sides[1], r.sides[0]}
	}
	return r.sides
}

func callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 2*time.Minute)
}

// --- one pod's and one container's calls ---

func (s *criSide) podConfig(name string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "bench", Uid: "uid-" + name},
		Hostname:     name,
		LogDirectory: filepath.Join(s.logDir, name),
		Linux:        &runtimeapi.LinuxPodSandboxConfig{CgroupParent: s.podParent},
	}
}

// newPodName is a pod name not used before on this side.
func (s *criSide) newPodName(kind string) string {
	s.seq++
	return fmt.Sprintf("%s-%d", kind, s.seq)
}

func (s *criSide) runPod(ctx context.Context, cfg *runtimeapi.PodSandboxConfig) (string, error) {
	r, err := s.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		return "", fmt.Errorf("%s: RunPodSandbox %s: %w", s.name, cfg.Metadata.Name, err)
	}
	return r.PodSandboxId, nil
}

// createStart creates and starts a container of the test image in pod
// (config cfg) whose init runs the test init's steps.
func (s *criSide) createStart(ctx context.Context, pod string, cfg *runtimeapi.PodSandboxConfig, name string,
	mounts []*runtimeapi.Mount, steps ...string) (string, error) {
	c, err := s.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: pod, SandboxConfig: cfg,
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name},
			Image: &runtimeapi.ImageSpec{Image: s.image}, Args: steps, LogPath: name + ".log", Mounts: mounts}})
	if err != nil {
		return "", fmt.Errorf("%s: CreateContainer %s: %w", s.name, name, err)
	}
	if _, err := s.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
		return "", fmt.Errorf("%s: StartContainer %s: %w", s.name, name, err)
	}
	return c.ContainerId, nil
}

func (s *criSide) stopRemovePod(ctx context.Context, pod string) error {
	if _, err := s.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: pod}); err != nil {
		return fmt.Errorf("%s: StopPodSandbox: %w", s.name, err)
	}
	if _, err := s.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: pod}); err != nil {
		return fmt.Errorf("%s: RemovePodSandbox: %w", s.name, err)
	}
	return nil
}

// podWithSleeper runs a pod with one container sleeping until killed.
func (s *criSide) podWithSleeper(ctx context.Context, kind string) (pod, ctr string, err error) {
	cfg := s.podConfig(s.newPodName(kind))
	if pod, err = s.runPod(ctx, cfg); err != nil {
		return "", "", err
	}
	ctr, err = s.createStart(ctx, pod, cfg, "sleeper", nil, "sleep", "forever")
	return pod, ctr, err
}

// --- the steps ---

// lifecycle times, one pod after another: RunPodSandbox, Create +
// StartContainer of a sleeping container, then StopPodSandbox +
// RemovePodSandbox (which stop the container), as kubelet runs a pod.
func (r *criRun) lifecycle() error {
	const warm = 2
	for i := range warm + r.b.cfg.criLifecycle {
		for _, s := range r.order(i) {
			ctx, cancel := callCtx()
			cfg := s.podConfig(s.newPodName("life"))
			t0 := time.Now()
			pod, err := s.runPod(ctx, cfg)
			t1 := time.Now()
			if err == nil {
				_, err = s.createStart(ctx, pod, cfg, "sleeper", nil, "sleep", "forever")
			}
			t2 := time.Now()
			if err == nil {
				err = s.stopRemovePod(ctx, pod)
			}
			t3 := time.Now()
			cancel()
			if err != nil {
				return err
			}
			if i >= warm {
				s.m.runPod = append(s.m.runPod, ms(t1.Sub(t0)))
				s.m.createStart = append(s.m.createStart, ms(t2.Sub(t1)))
				s.m.stopRemove = append(s.m.stopRemove, ms(t3.Sub(t2)))
			}
		}
	}
	return nil
}

// execSync times ExecSync /bin/true in a running container: one call
// after another (blocks of 10 per side, alternating), then 20 callers at
// once (rounds alternating).
func (r *criRun) execSync() error {
	ctx, cancel := callCtx()
	defer cancel()
	var ctrs, pods [2]string
	for i, s := range r.sides {
		var err error
		if pods[i], ctrs[i], err = s.podWithSleeper(ctx, "exec"); err != nil {
			return err
		}
	}
	exec := func(s *criSide, ctr string) (float64, error) {
		ctx, cancel := callCtx()
		defer cancel()
		t0 := time.Now()
		resp, err := s.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: ctr, Cmd: []string{"/bin/true"}, Timeout: 30})
		d := ms(time.Since(t0))
		if err != nil {
			return 0, fmt.Errorf("%s: ExecSync: %w", s.name, err)
		}
		if resp.ExitCode != 0 {
			return 0, fmt.Errorf("%s: ExecSync /bin/true: exit code %d: %s%s", s.name, resp.ExitCode, resp.Stdout, resp.Stderr)
		}
		return d, nil
	}
	idx := func(s *criSide) int {
		if s == r.sides[0] {
			return 0
		}
		return 1
	}
	for _, s := range r.sides {
		for range 5 { // warm-up
			if _, err := exec(s, ctrs[idx(s)]); err != nil {
				return err
			}
		}
	}
	const block = 10
	for blk := range max(1, r.b.cfg.criExecSeq/block) {
		for _, s := range r.order(blk) {
			for range block {
				d, err := exec(s, ctrs[idx(s)])
				if err != nil {
					return err
				}
				s.m.execSeq = append(s.m.execSeq, d)
			}
		}
		for range block {
			d, err := r.bareRuncExec(ctrs[0])
			if err != nil {
				return err
			}
			r.runcExec = append(r.runcExec, d)
		}
	}
	callers, per := r.b.cfg.criExecCallers, r.b.cfg.criExecPerCaller
	for round := range 2 * r.b.cfg.criExecRounds {
		s := r.order(round / 2)[round%2]
		var mu sync.Mutex
		var lat []float64
		var firstErr error
		var wg sync.WaitGroup
		t0 := time.Now()
		for range callers {
			wg.Go(func() {
				for range per {
					d, err := exec(s, ctrs[idx(s)])
					mu.Lock()
					if err != nil && firstErr == nil {
						firstErr = err
					}
					lat = append(lat, d)
					mu.Unlock()
					if err != nil {
						return
					}
				}
			})
		}
		wg.Wait()
		wall := time.Since(t0)
		if firstErr != nil {
			return firstErr
		}
		s.m.execConcLat = append(s.m.execConcLat, lat...)
		s.m.execConcPerS = append(s.m.execConcPerS, float64(callers*per)/wall.Seconds())
	}
	for i, s := range r.sides {
		if err := s.stopRemovePod(ctx, pods[i]); err != nil {
			return err
		}
	}
	return nil
}

// bareRuncExec times what every ExecSync of both sides costs at least: the
// runtime's own exec (`runc exec -d`, as both shims run it, in our
// container through our daemon's runc root) until the process has exited
// (a pidfd of the pid runc wrote; the container's init reaps it).
func (r *criRun) bareRuncExec(ctr string) (float64, error) {
	rc := r.ours.Runc()
	pidFile := r.b.env.Path("cri-runc-exec.pid")
	t0 := time.Now()
	out, err := exec.Command(rc.Bin, "--root", rc.Root, "exec", "-d", "--pid-file", pidFile, ctr, "/bin/true").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("bare runc exec: %w: %s", err, out)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("bare runc exec: pid file: %w", err)
	}
	if fd, err := unix.PidfdOpen(pid, 0); err == nil { // ESRCH: gone already
		unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 30_000)
		unix.Close(fd)
	}
	return ms(time.Since(t0)), nil
}

// exits times a container's exit to the CRI: its init sleeps 50 ms, writes
// "STAMP <unix ns>" to a file of a host dir mounted in it and exits. Every
// other exit ContainerStatus is polled without pause from 30 ms after the
// start until it says EXITED; the others wait for the
// CONTAINER_STOPPED_EVENT of a GetContainerEvents stream open since the
// start of the group. On our side the 0.2 API's exit event of the same
// exits is timed too (a subscriber open throughout).
func (r *criRun) exits() error {
	ctx, cancel := callCtx()
	defer cancel()
	var pods [2]string
	var cfgs [2]*runtimeapi.PodSandboxConfig
	for i, s := range r.sides {
		cfgs[i] = s.podConfig(s.newPodName("exit"))
		var err error
		if pods[i], err = s.runPod(ctx, cfgs[i]); err != nil {
			return err
		}
	}
	mounts := []*runtimeapi.Mount{{ContainerPath: "/stamps", HostPath: r.stamps}}
	const warm = 2
	n := r.b.cfg.criExits
	for i := range 2 * (warm + n) {
		polled := i%2 == 0
		for _, s := range r.order(i / 2) {
			si := 0
			if s != r.sides[0] {
				si = 1
			}
			name := fmt.Sprintf("exit-%d", i)
			stamp := filepath.Join(r.stamps, s.name+"-"+name)
			id, err := s.createStart(ctx, pods[si], cfgs[si], name, mounts, "sleep", "50ms", "--", "stamp", "/stamps/"+s.name+"-"+name)
			if err != nil {
				return err
			}
			var seen time.Time
			var finished int64
			if polled {
				time.Sleep(30 * time.Millisecond)
				for poll := time.Now(); ; {
					st, err := s.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
					if err != nil {
						return fmt.Errorf("%s: ContainerStatus: %w", s.name, err)
					}
					if st.Status.State == runtimeapi.ContainerState_CONTAINER_EXITED {
						seen, finished = time.Now(), st.Status.FinishedAt
						if st.Status.ExitCode != 0 {
							return fmt.Errorf("%s: %s exited %d (%s)", s.name, name, st.Status.ExitCode, st.Status.Message)
						}
						break
					}
					if time.Since(poll) > time.Minute {
						return fmt.Errorf("%s: %s not EXITED after a minute", s.name, name)
					}
				}
			} else if seen, err = s.events.await(id, time.Minute); err != nil {
				return fmt.Errorf("%s: %s: %w", s.name, name, err)
			}
			at, err := readStamp(stamp)
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			var api time.Time
			if s.apiExits != nil {
				if api, err = s.apiExits.await(id, time.Minute); err != nil {
					return fmt.Errorf("%s: %s: the 0.2 API's exit: %w", s.name, name, err)
				}
			}
			if _, err := s.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
				return fmt.Errorf("%s: RemoveContainer: %w", s.name, err)
			}
			if i < 2*warm {
				continue
			}
			switch {
			case polled:
				s.m.exitStatus = append(s.m.exitStatus, ms(seen.Sub(at)))
				s.m.finishedToStatus = append(s.m.finishedToStatus, ms(seen.Sub(time.Unix(0, finished))))
				s.m.stampToFinished = append(s.m.stampToFinished, ms(time.Unix(0, finished).Sub(at)))
				if !api.IsZero() {
					s.m.apiExitPolled = append(s.m.apiExitPolled, ms(api.Sub(at)))
				}
			default:
				s.m.exitEvent = append(s.m.exitEvent, ms(seen.Sub(at)))
				if !api.IsZero() {
					s.m.apiExitEvented = append(s.m.apiExitEvented, ms(api.Sub(at)))
				}
			}
		}
	}
	for i, s := range r.sides {
		if err := s.stopRemovePod(ctx, pods[i]); err != nil {
			return err
		}
	}
	return nil
}

// manyPods runs rounds of 50 pods at once per side (each pod: run, create
// and start a sleeping container), the sides one after the other; with
// both sets up, times the stats lists (calls alternating); in the first
// round it also measures the idle CPU and the memory; then tears each set
// down at once (stop and remove of every pod).
func (r *criRun) manyPods() error {
	n := r.b.cfg.criPods
	for round := range r.b.cfg.criRounds {
		order := r.order(round)
		var pods [2][]string
		for k, s := range order {
			t0 := time.Now()
			ids, err := s.podsAtOnce(n)
			if err != nil {
				return err
			}
			s.m.podsAtOnce = append(s.m.podsAtOnce, ms(time.Since(t0)))
			pods[k] = ids
		}
		if err := r.listStats(round); err != nil {
			return err
		}
		if round == 0 {
			if err := r.idleCPU(); err != nil {
				return err
			}
			r.memory()
		}
		for k, s := range order {
			t0 := time.Now()
			var wg sync.WaitGroup
			errs := make([]error, len(pods[k]))
			for j, p := range pods[k] {
				wg.Go(func() {
					ctx, cancel := callCtx()
					defer cancel()
					errs[j] = s.stopRemovePod(ctx, p)
				})
			}
			wg.Wait()
			s.m.teardown = append(s.m.teardown, ms(time.Since(t0)))
			if err := errors.Join(errs...); err != nil {
				return err
			}
		}
	}
	return nil
}

// podsAtOnce runs n pods, each with a sleeping container, from n
// goroutines released together; it returns once all run.
func (s *criSide) podsAtOnce(n int) ([]string, error) {
	ids := make([]string, n)
	errs := make([]error, n)
	cfgs := make([]*runtimeapi.PodSandboxConfig, n)
	for i := range n {
		cfgs[i] = s.podConfig(s.newPodName("many"))
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := callCtx()
			defer cancel()
			pod, err := s.runPod(ctx, cfgs[i])
			if err == nil {
				ids[i] = pod
				_, err = s.createStart(ctx, pod, cfgs[i], "sleeper", nil, "sleep", "forever")
			}
			errs[i] = err
		})
	}
	wg.Wait()
	return ids, errors.Join(errs...)
}

// listStats times ListContainerStats and ListPodSandboxStats with both
// sets of pods up, the sides alternating call by call, after one call
// each that is not timed.
func (r *criRun) listStats(round int) error {
	calls := r.b.cfg.criStatsCalls
	for i := range 1 + calls {
		for _, s := range r.order(i + round) {
			ctx, cancel := callCtx()
			t0 := time.Now()
			cs, err := s.rt.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{})
			t1 := time.Now()
			if err != nil {
				cancel()
				return fmt.Errorf("%s: ListContainerStats: %w", s.name, err)
			}
			ps, err := s.rt.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{})
			t2 := time.Now()
			cancel()
			if err != nil {
				return fmt.Errorf("%s: ListPodSandboxStats: %w", s.name, err)
			}
			if len(cs.Stats) < r.b.cfg.criPods || len(ps.Stats) < r.b.cfg.criPods {
				return fmt.Errorf("%s: stats of %d containers and %d pods, want %d of each", s.name, len(cs.Stats), len(ps.Stats), r.b.cfg.criPods)
			}
			if i == 0 {
				s.m.statsFields = podStatsFields(ps.Stats)
				continue
			}
			s.m.listCtrStats = append(s.m.listCtrStats, ms(t1.Sub(t0)))
			s.m.listPodStats = append(s.m.listPodStats, ms(t2.Sub(t1)))
		}
	}
	return nil
}

// podStatsFields says which parts of a pod's stats the runtime filled in
// (for the first pod that has stats at all).
func podStatsFields(stats []*runtimeapi.PodSandboxStats) string {
	for _, p := range stats {
		l := p.GetLinux()
		if l == nil {
			continue
		}
		var f []string
		if l.Cpu != nil && l.Cpu.UsageCoreNanoSeconds != nil {
			f = append(f, "cpu")
		}
		if l.Memory != nil && l.Memory.WorkingSetBytes != nil {
			f = append(f, "memory")
		}
		if l.Network != nil && (l.Network.DefaultInterface != nil || len(l.Network.Interfaces) > 0) {
			f = append(f, "network")
		}
		if l.Process != nil && l.Process.ProcessCount != nil {
			f = append(f, "process count")
		}
		f = append(f, fmt.Sprintf("%d container(s)", len(l.Containers)))
		return strings.Join(f, ", ")
	}
	return "none"
}

// idleCPU takes the CPU time (user + system, with reaped children's) of
// each daemon and its shims over a fixed window while the pods idle, both
// sides over the same window.
func (r *criRun) idleCPU() error {
	time.Sleep(2 * time.Second) // the creations' tail (GC, trims)
	type sample struct {
		pids          []int // the daemon's first
		ticks, daemon int64
	}
	take := func(s *criSide) sample {
		pids := []int{s.daemonPid()}
		for _, p := range s.shims() {
			pids = append(pids, p.Pid)
		}
		var t int64
		for _, p := range pids {
			t += cpuTicks(p)
		}
		return sample{pids, t, cpuTicks(pids[0])}
	}
	var before [2]sample
	for i, s := range r.sides {
		before[i] = take(s)
	}
	window := r.b.cfg.criIdleWindow
	time.Sleep(window)
	for i, s := range r.sides {
		// The same processes: a process gone since counts nothing after.
		var t int64
		for _, p := range before[i].pids {
			t += cpuTicks(p)
		}
		s.m.cpuPercent = float64(t-before[i].ticks) / clockTicks / window.Seconds() * 100
		s.m.cpuDaemonPercent = float64(cpuTicks(before[i].pids[0])-before[i].daemon) / clockTicks / window.Seconds() * 100
	}
	return nil
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times (100 on
// every Linux architecture Go runs on).
const clockTicks = 100

// cpuTicks is utime + stime + cutime + cstime of /proc/<pid>/stat (0 for a
// process gone).
func cpuTicks(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	// After the comm: state is field 3, utime..cstime fields 14-17.
	if len(f) < 15 {
		return 0
	}
	var t int64
	for _, x := range f[11:15] {
		var v int64
		fmt.Sscan(x, &v)
		t += v
	}
	return t
}

// memory sums Pss and Rss (smaps_rollup) of each daemon, its shims and
// its pods' pause processes (children of the shims running /pause).
func (r *criRun) memory() {
	for _, s := range r.sides {
		shims := s.shims()
		isShim := map[int]bool{}
		for _, p := range shims {
			isShim[p.Pid] = true
		}
		pauses := harness.Procs(func(p harness.Proc) bool {
			return isShim[p.PPid] && len(p.Args) > 0 && p.Args[0] == "/pause"
		})
		pids := []int{s.daemonPid()}
		for _, p := range append(shims, pauses...) {
			pids = append(pids, p.Pid)
		}
		var rss, pss int64
		for i, pid := range pids {
			r, p, err := harness.SmapsRollup(pid)
			if err != nil {
				continue
			}
			rss, pss = rss+r, pss+p
			if i == 0 {
				s.m.daemonRSSKiB = float64(r)
			}
		}
		s.m.rssKiB, s.m.pssKiB = float64(rss), float64(pss)
		s.m.shimCount, s.m.pauseCount = len(shims), len(pauses)
	}
}

// --- event streams ---

// eventLog is the first receipt time of an event per key, and a way to
// wait for it.
type eventLog struct {
	mu sync.Mutex
	m  map[string]*logEntry
	// err is why the stream ended, once it has.
	err error
}

type logEntry struct {
	at   time.Time
	done chan struct{}
}

func newEventLog() *eventLog { return &eventLog{m: map[string]*logEntry{}} }

func (l *eventLog) entry(key string) *logEntry {
	e := l.m[key]
	if e == nil {
		e = &logEntry{done: make(chan struct{})}
		l.m[key] = e
	}
	return e
}

func (l *eventLog) record(key string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.entry(key); e.at.IsZero() {
		e.at = at
		close(e.done)
	}
}

func (l *eventLog) end(err error) {
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
}

// await returns the receipt time of key's event, waiting up to limit.
func (l *eventLog) await(key string, limit time.Duration) (time.Time, error) {
	l.mu.Lock()
	e := l.entry(key)
	l.mu.Unlock()
	select {
	case <-e.done:
		return e.at, nil
	case <-time.After(limit):
		l.mu.Lock()
		defer l.mu.Unlock()
		return time.Time{}, fmt.Errorf("no event within %s (stream: %v)", limit, l.err)
	}
}

// watchCRIEvents opens a GetContainerEvents stream for the rest of the run
// and records each CONTAINER_STOPPED_EVENT's receipt by container id.
func watchCRIEvents(env *harness.Env, rt runtimeapi.RuntimeServiceClient) (*eventLog, error) {
	ctx, cancel := context.WithCancel(context.Background())
	env.Defer(cancel)
	stream, err := rt.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		cancel()
		return nil, err
	}
	l := newEventLog()
	go func() {
		for {
			ev, err := stream.Recv()
			if err != nil {
				l.end(err)
				return
			}
			if ev.ContainerEventType == runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT {
				l.record(ev.ContainerId, time.Now())
			}
		}
	}()
	return l, nil
}

// watchAPIExits subscribes to the daemon's 0.2 API events for the rest of
// the run and records each init exit's receipt by container id.
func watchAPIExits(env *harness.Env, d *harness.Daemon) (*eventLog, error) {
	ctx, cancel := context.WithCancel(context.Background())
	env.Defer(cancel)
	sub, err := harness.Subscribe(ctx, d.Client, &types.EventsRequest{}, 4096)
	if err != nil {
		cancel()
		return nil, err
	}
	env.Defer(sub.Close)
	l := newEventLog()
	go func() {
		for r := range sub.C {
			if r.Ev.Type == "exit" && (r.Ev.Pid == "" || r.Ev.Pid == "init") {
				l.record(r.Ev.Id, r.At)
			}
		}
		l.end(sub.Err())
	}()
	return l, nil
}

// --- the figures ---

// report adds the group's figures: each a ratio ours ÷ containerd (but
// the two that are ours alone), with both measurements beside it.
func (r *criRun) report() {
	rep := r.b.rep
	o, c := &r.sides[0].m, &r.sides[1].m
	p := harness.Percentile
	med := harness.Median
	inMs := func(v float64) string { return harness.Num(v) + " ms" }
	ratio := func(name string, ours, peer float64, show func(float64) string, target string, goal float64, max bool, note string) {
		if math.IsNaN(ours) || math.IsNaN(peer) {
			return // its step did not run (-cri-steps)
		}
		rep.Add(harness.Figure{Name: name, Value: ours / peer, Unit: "ratio", Target: target, Goal: goal, Max: max,
			Ours: show(ours), Peer: show(peer), Note: note})
	}
	lc := len(o.runPod)
	ratio("cri_run_pod_ratio_vs_containerd", med(o.runPod), med(c.runPod), inMs, "<= 1.0", 1, true,
		fmt.Sprintf("RunPodSandbox, median of %d pods one after another (CNI bridge + portmap, host-local)", lc))
	ratio("cri_create_start_ratio_vs_containerd", med(o.createStart), med(c.createStart), inMs, "<= 1.0", 1, true,
		fmt.Sprintf("CreateContainer + StartContainer of a sleeping container in that pod, median of %d", lc))
	ratio("cri_stop_remove_pod_ratio_vs_containerd", med(o.stopRemove), med(c.stopRemove), inMs, "<= 1.0", 1, true,
		fmt.Sprintf("StopPodSandbox + RemovePodSandbox of that pod, its container running, median of %d", lc))
	floorNote := ""
	if fl := p(r.runcExec, 50); !math.IsNaN(fl) {
		floorNote = fmt.Sprintf("; the floor, bare `runc exec -d` of /bin/true until its exit, interleaved: p50 %s, so ours is %.2f× it and containerd %.2f×",
			inMs(fl), p(o.execSeq, 50)/fl, p(c.execSeq, 50)/fl)
		rep.Line("cri_execsync_runc_exec_floor_p50_ms", fl, "ms")
		rep.Line("cri_execsync_p50_ratio_vs_runc_exec_ours", p(o.execSeq, 50)/fl, "ratio")
		rep.Line("cri_execsync_p50_ratio_vs_runc_exec_containerd", p(c.execSeq, 50)/fl, "ratio")
	}
	ratio("cri_execsync_p50_ratio_vs_containerd", p(o.execSeq, 50), p(c.execSeq, 50), inMs, "<= 0.8", 0.8, true,
		fmt.Sprintf("ExecSync /bin/true, %d calls one after another (blocks of 10 per side, alternating)%s", len(o.execSeq), floorNote))
	ratio("cri_execsync_p99_ratio_vs_containerd", p(o.execSeq, 99), p(c.execSeq, 99), inMs, "<= 1.0", 1, true, "the same calls")
	callers := r.b.cfg.criExecCallers
	ratio("cri_execsync_concurrent_throughput_ratio_vs_containerd", med(o.execConcPerS), med(c.execConcPerS),
		func(v float64) string { return harness.Num(v) + " calls/s" }, ">= 1.0", 1, false,
		fmt.Sprintf("ours ÷ containerd, higher is better: %d callers at once, %d calls each, median of %d rounds per side (alternating)",
			callers, r.b.cfg.criExecPerCaller, len(o.execConcPerS)))
	ratio("cri_execsync_concurrent_p99_ratio_vs_containerd", p(o.execConcLat, 99), p(c.execConcLat, 99), inMs, "<= 1.0", 1, true,
		fmt.Sprintf("latency of those %d calls per side; p50 %s against %s", len(o.execConcLat), inMs(p(o.execConcLat, 50)), inMs(p(c.execConcLat, 50))))
	pods := r.b.cfg.criPods
	ratio("cri_list_container_stats_ratio_vs_containerd", med(o.listCtrStats), med(c.listCtrStats), inMs, "<= 0.5", 0.5, true,
		fmt.Sprintf("ListContainerStats with %d pods of one running container each per side, median of %d calls (sides alternating)", pods, len(o.listCtrStats)))
	ratio("cri_list_pod_stats_ratio_vs_containerd", med(o.listPodStats), med(c.listPodStats), inMs, "<= 1.0", 1, true,
		fmt.Sprintf("ListPodSandboxStats, the same pods and calls; a pod's stats hold: ours %s; containerd %s", o.statsFields, c.statsFields))
	ratio("cri_exit_to_status_ratio_vs_containerd", p(o.exitStatus, 50), p(c.exitStatus, 50), inMs, "<= 0.2", 0.2, true,
		fmt.Sprintf("p50, the container's STAMP (written right before it exits) → ContainerStatus EXITED, polled without pause, %d exits per side; p99 %s against %s; "+
			"from the status's finished_at: p50 %s against %s", len(o.exitStatus), inMs(p(o.exitStatus, 99)), inMs(p(c.exitStatus, 99)),
			inMs(p(o.finishedToStatus, 50)), inMs(p(c.finishedToStatus, 50))))
	ratio("cri_exit_to_event_ratio_vs_containerd", p(o.exitEvent, 50), p(c.exitEvent, 50), inMs, "<= 1.0", 1, true,
		fmt.Sprintf("p50, STAMP → CONTAINER_STOPPED_EVENT received on a GetContainerEvents stream, %d other exits per side (no polling); p99 %s against %s",
			len(o.exitEvent), inMs(p(o.exitEvent, 99)), inMs(p(c.exitEvent, 99))))
	apiNote := ""
	for _, f := range rep.Figures {
		if f.Name == "exit_event_p50_ms" {
			apiNote = fmt.Sprintf("; the exit group's exit_event_p50_ms of this run (plain containers): %s", inMs(f.Value))
		}
	}
	minus := p(o.exitStatus, 50) - p(o.apiExitPolled, 50)
	rep.Add(harness.Figure{Name: "cri_exit_to_status_minus_api_exit_ms", Value: minus, Unit: "ms", Target: "<= 1", Goal: 1, Max: true,
		Ours: fmt.Sprintf("%s − %s", inMs(p(o.exitStatus, 50)), inMs(p(o.apiExitPolled, 50))), Peer: "—",
		Note: "ours alone: p50 of STAMP → ContainerStatus EXITED minus p50 of STAMP → the 0.2 API's exit event at a live subscriber, the same exits" + apiNote})
	rep.Add(harness.Figure{Name: "cri_exit_to_event_minus_api_exit_ms", Value: p(o.exitEvent, 50) - p(o.apiExitEvented, 50), Unit: "ms",
		Target: "<= 1", Goal: 1, Max: true, Peer: "—",
		Ours: fmt.Sprintf("%s − %s", inMs(p(o.exitEvent, 50)), inMs(p(o.apiExitEvented, 50))),
		Note: "ours alone: the same for the CONTAINER_STOPPED_EVENT exits"})
	mib := func(v float64) string { return fmt.Sprintf("%.2f MiB", v/1024) }
	memNote := func(what string) string {
		return fmt.Sprintf("%s of /proc/PID/smaps_rollup summed over the daemon, its shims and its pods' pause processes with %d pods of one sleeping container each, ÷ %d "+
			"(ours %d shims, %d pauses; containerd %d shims, %d pauses), after the idle window", what, pods, pods, o.shimCount, o.pauseCount, c.shimCount, c.pauseCount)
	}
	ratio("cri_pss_per_pod_ratio_vs_containerd", o.pssKiB/float64(pods), c.pssKiB/float64(pods), mib, "<= 0.5", 0.5, true, memNote("Pss"))
	ratio("cri_rss_per_pod_ratio_vs_containerd", o.rssKiB/float64(pods), c.rssKiB/float64(pods), mib, "<= 0.5", 0.5, true, memNote("Rss"))
	ratio("cri_daemon_rss_50_pods_ratio_vs_containerd", o.daemonRSSKiB, c.daemonRSSKiB, mib, "<= 1.0", 1, true,
		fmt.Sprintf("Rss of the daemon alone with the %d pods", pods))
	ratio("cri_50_pods_at_once_ratio_vs_containerd", med(o.podsAtOnce), med(c.podsAtOnce), inMs, "<= 1.0", 1, true,
		fmt.Sprintf("%d × (RunPodSandbox, Create + StartContainer) released at once, wall time to the last; median of %d rounds per side (alternating which goes first)",
			pods, len(o.podsAtOnce)))
	ratio("cri_50_pods_teardown_ratio_vs_containerd", med(o.teardown), med(c.teardown), inMs, "<= 1.0", 1, true,
		fmt.Sprintf("%d × (StopPodSandbox + RemovePodSandbox) at once, wall time; median of %d rounds", pods, len(o.teardown)))
	pct := func(v float64) string { return fmt.Sprintf("%.2f %%", v) }
	rep.Add(harness.Figure{Name: "cri_idle_cpu_50_pods_percent", Value: o.cpuPercent, Unit: "%", Target: "<= 0.1", Goal: 0.1, Max: true,
		Ours: pct(o.cpuPercent), Peer: pct(c.cpuPercent),
		Note: fmt.Sprintf("ours alone (containerd's beside it): CPU time of the daemon and its shims (utime + stime + reaped children's, /proc/PID/stat) over %s "+
			"with %d idle pods per side, both sides over the same window, in %% of one CPU; 0.1 is one clock tick per 10 s; the daemon's part: ours %.2f %%, containerd's %.2f %%",
			r.b.cfg.criIdleWindow, pods, o.cpuDaemonPercent, c.cpuDaemonPercent)})
	for _, x := range []struct {
		name string
		v    [2]float64
	}{
		{"run_pod_median_ms", [2]float64{med(o.runPod), med(c.runPod)}},
		{"create_start_median_ms", [2]float64{med(o.createStart), med(c.createStart)}},
		{"stop_remove_pod_median_ms", [2]float64{med(o.stopRemove), med(c.stopRemove)}},
		{"execsync_p50_ms", [2]float64{p(o.execSeq, 50), p(c.execSeq, 50)}},
		{"execsync_p99_ms", [2]float64{p(o.execSeq, 99), p(c.execSeq, 99)}},
		{"execsync_concurrent_per_s", [2]float64{med(o.execConcPerS), med(c.execConcPerS)}},
		{"execsync_concurrent_p99_ms", [2]float64{p(o.execConcLat, 99), p(c.execConcLat, 99)}},
		{"list_container_stats_median_ms", [2]float64{med(o.listCtrStats), med(c.listCtrStats)}},
		{"list_pod_stats_median_ms", [2]float64{med(o.listPodStats), med(c.listPodStats)}},
		{"exit_to_status_p50_ms", [2]float64{p(o.exitStatus, 50), p(c.exitStatus, 50)}},
		{"exit_to_event_p50_ms", [2]float64{p(o.exitEvent, 50), p(c.exitEvent, 50)}},
		{"finished_at_to_status_p50_ms", [2]float64{p(o.finishedToStatus, 50), p(c.finishedToStatus, 50)}},
		{"stamp_to_finished_at_p50_ms", [2]float64{p(o.stampToFinished, 50), p(c.stampToFinished, 50)}},
		{"pss_per_pod_kib", [2]float64{o.pssKiB / float64(pods), c.pssKiB / float64(pods)}},
		{"rss_per_pod_kib", [2]float64{o.rssKiB / float64(pods), c.rssKiB / float64(pods)}},
		{"daemon_rss_50_pods_kib", [2]float64{o.daemonRSSKiB, c.daemonRSSKiB}},
		{"50_pods_at_once_ms", [2]float64{med(o.podsAtOnce), med(c.podsAtOnce)}},
		{"50_pods_teardown_ms", [2]float64{med(o.teardown), med(c.teardown)}},
		{"idle_cpu_50_pods_percent", [2]float64{o.cpuPercent, c.cpuPercent}},
	} {
		unit := map[string]string{"ms": "ms", "s": "calls/s", "kib": "KiB", "percent": "%"}[x.name[strings.LastIndexByte(x.name, '_')+1:]]
		if math.IsNaN(x.v[0]) || math.IsNaN(x.v[1]) || len(o.runPod)+len(o.execSeq)+len(o.exitStatus)+len(o.podsAtOnce) == 0 {
			continue
		}
		rep.Line("cri_"+x.name+"_ours", x.v[0], unit)
		rep.Line("cri_"+x.name+"_containerd", x.v[1], unit)
	}
	if len(o.apiExitPolled) > 0 {
		rep.Line("cri_api_exit_p50_ms_ours", p(o.apiExitPolled, 50), "ms")
	}
}
