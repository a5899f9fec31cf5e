package reliability

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/bench/internal/harness"
)

// chaos runs a concurrent lifecycle workload (starts, execs, kills,
// pause/resume, natural exits with chosen statuses) while the daemon is
// SIGKILLed at random moments and started again; while it is down, some
// container processes are killed too. After each restart every process
// the workload started must be either listed (and alive) or have exactly
// one exit in the journal (replayed from the beginning, stored-only) with
// a status it could have had; no shim may outlive the daemon's knowledge
// of its container, no zombie may stay, every journal line must decode.
func (s *Suite) chaos() error {
	d, base, err := s.startWithBundle("chaos-base", "chaos", "--retain-count", "0")
	if err != nil {
		return err
	}
	seed := s.cfg.Seed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	s.cfg.Logf("chaos: seed %d", seed)
	c := &chaosRun{s: s, d: d, rootfs: filepath.Join(base, "rootfs"), rng: rand.New(rand.NewSource(seed)),
		procs: map[procKey]*proc{}, ctrs: map[string]*ctr{}, counted: map[string]bool{}}
	defer c.closePidfds()
	return c.run()
}

type procKey struct{ id, pid string }

func (k procKey) String() string { return k.id + "/" + k.pid }

// Outcome of the RPC that started a process.
const (
	pending   = iota // RPC in flight
	started          // acknowledged
	failedRPC        // refused with a clear error: must never appear
	uncertain        // lost with the daemon: may or may not have started
)

type proc struct {
	key     procKey
	state   int
	allowed map[uint32]bool // exit statuses it may have
	pidfd   int             // -1: none
	exited  bool            // its exit was seen in the journal
	// wasUncertain: its start RPC was lost with the daemon, and the daemon
	// turned out to know the process.
	wasUncertain bool
}

type ctr struct {
	id     string
	init   *proc
	execs  []*proc
	paused bool // paused by us, resume not acknowledged
	nexec  int
}

type chaosRun struct {
	s      *Suite
	d      *harness.Daemon
	rootfs string

	gate sync.RWMutex // workers hold it for reading around each RPC; a restart holds it for writing

	mu      sync.Mutex // guards everything below
	rng     *rand.Rand
	procs   map[procKey]*proc
	ctrs    map[string]*ctr
	nextID  int
	counted map[string]bool // violations already counted, by kind and process

	// Findings, and what the run did.
	kills, lost, dups, wrong, phantoms, orphans, zombies, unreadable, seqGaps, listedDead int

	direct   int // container processes killed while the daemon was down
	fileBad  int // most undecodable lines seen in the journal's segments
	unknown  int // interrupted starts the daemon closed with status 255
	runcLeft int // runc containers left after the final stop
}

func (c *chaosRun) intn(n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rng.Intn(n)
}

func (c *chaosRun) run() error {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	harness.Repeat(c.s.cfg.ChaosWorkers, stop, &wg, func(int) bool {
		c.gate.RLock()
		c.step(c.d.Client)
		c.gate.RUnlock()
		time.Sleep(time.Duration(c.intn(20)) * time.Millisecond)
		return true
	})
	t0 := time.Now()
	var runErr error
	for c.kills < c.s.cfg.ChaosKills && time.Since(t0) < c.s.cfg.ChaosTime {
		time.Sleep(time.Duration(300+c.intn(2200)) * time.Millisecond)
		if err := c.crashAndRestart(); err != nil {
			runErr = err
			break
		}
	}
	close(stop)
	wg.Wait()
	if runErr == nil {
		runErr = c.finish()
	}
	c.s.line("chaos_processes_started", float64(c.count(started)), "processes")
	c.s.line("chaos_direct_kills_while_down", float64(c.direct), "processes")
	c.s.line("chaos_interrupted_starts_exit_255", float64(c.unknown), "processes")
	c.s.Report.Line("daemon_kills", float64(c.kills), "kills")
	c.s.zero("lost_exits", c.lost, "exits")
	c.s.zero("duplicate_exits", c.dups, "exits")
	c.s.zero("orphan_shims", c.orphans, "processes")
	c.s.zero("zombies", c.zombies, "processes")
	c.s.zero("journal_unreadable", c.unreadable+c.fileBad, "records")
	c.s.zero("wrong_exit_status", c.wrong, "exits")
	c.s.zero("phantom_processes", c.phantoms, "processes")
	c.s.zero("listed_but_dead", c.listedDead, "processes")
	c.s.zero("journal_seq_gaps", c.seqGaps, "gaps")
	c.s.zero("orphan_runc_containers", c.runcLeft, "containers")
	return runErr
}

func (c *chaosRun) count(state int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, p := range c.procs {
		if p.state == state {
			n++
		}
	}
	return n
}

// step runs one random lifecycle operation.
func (c *chaosRun) step(cl types.APIClient) {
	live := c.liveContainers()
	r := c.intn(100)
	switch {
	case r < 35 && len(live) < 40:
		c.start(cl)
	case r < 55 && len(live) > 0:
		c.exec(cl, live[c.intn(len(live))])
	case r < 80:
		c.kill(cl)
	case len(live) > 0:
		c.pauseResume(cl, live[c.intn(len(live))])
	}
}

func (c *chaosRun) liveContainers() []*ctr {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*ctr
	for _, x := range c.ctrs {
		if x.init.state == started && !x.init.exited {
			out = append(out, x)
		}
	}
	return out
}

func rpcCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 20*time.Second)
}

// outcome classifies the error of a start RPC.
func outcome(err error) int {
	if err == nil {
		return started
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.Canceled, codes.DeadlineExceeded, codes.Unknown:
		return uncertain
	}
	return failedRPC
}

// steps picks the process's program: sleep forever, or sleep a little and
// exit with a chosen status (never 2, 137 or 143, the statuses of kills).
func (c *chaosRun) steps() ([]string, map[uint32]bool) {
	if c.intn(2) == 0 {
		return []string{"sleep", "forever"}, map[uint32]bool{}
	}
	code := 3 + c.intn(120)
	d := 50 + c.intn(1500)
	return []string{"sleep", fmt.Sprintf("%dms", d), "--", "exit", fmt.Sprint(code)}, map[uint32]bool{uint32(code): true}
}

func (c *chaosRun) start(cl types.APIClient) {
	c.mu.Lock()
	c.nextID++
	id := c.s.env.ID(fmt.Sprintf("ch%d", c.nextID))
	c.mu.Unlock()
	steps, allowed := c.steps()
	bundle, err := c.s.env.SharedBundle(c.rootfs, filepath.Join("chaos", id), harness.Args(steps...))
	if err != nil {
		c.s.cfg.Logf("chaos: bundle: %v", err)
		return
	}
	p := &proc{key: procKey{id, "init"}, allowed: allowed, pidfd: -1}
	c.mu.Lock()
	c.procs[p.key] = p
	c.ctrs[id] = &ctr{id: id, init: p}
	c.mu.Unlock()
	ctx, cancel := rpcCtx()
	resp, err := cl.CreateContainer(ctx, &types.CreateContainerRequest{Id: id, BundlePath: bundle})
	cancel()
	var pid uint32
	for _, pr := range resp.GetContainer().GetProcesses() {
		if pr.Pid == "init" {
			pid = pr.SystemPid
		}
	}
	c.settle(p, err, int(pid))
}

func (c *chaosRun) settle(p *proc, err error, pid int) {
	fd := -1
	if err == nil && pid > 0 {
		fd = openTestinit(pid)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p.state = outcome(err)
	p.pidfd = fd
}

// openTestinit opens a pidfd on pid if it still is a test init process, so
// a later kill can never hit a recycled pid.
func openTestinit(pid int) int {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if !strings.HasPrefix(string(cmdline), "/testinit") {
		unix.Close(fd)
		return -1
	}
	return fd
}

func (c *chaosRun) exec(cl types.APIClient, x *ctr) {
	steps, allowed := c.steps()
	allowed[137] = true // the kernel kills execs when their init dies
	c.mu.Lock()
	if x.paused {
		c.mu.Unlock()
		return
	}
	x.nexec++
	p := &proc{key: procKey{x.id, fmt.Sprintf("e%d", x.nexec)}, allowed: allowed, pidfd: -1}
	c.procs[p.key] = p
	x.execs = append(x.execs, p)
	c.mu.Unlock()
	ctx, cancel := rpcCtx()
	resp, err := cl.AddProcess(ctx, execReq(x.id, p.key.pid, steps...))
	cancel()
	c.settle(p, err, int(resp.GetSystemPid()))
}

// kill signals a random live process: SIGKILL, or SIGTERM (an init, pid 1
// of its namespace, then exits 2: the Go runtime cannot die of it).
func (c *chaosRun) kill(cl types.APIClient) {
	c.mu.Lock()
	var live []*proc
	for _, p := range c.procs {
		if p.state == started && !p.exited {
			live = append(live, p)
		}
	}
	if len(live) == 0 {
		c.mu.Unlock()
		return
	}
	p := live[c.rng.Intn(len(live))]
	sig := syscall.SIGKILL
	if c.rng.Intn(4) == 0 {
		sig = syscall.SIGTERM
	}
	if sig == syscall.SIGKILL {
		p.allowed[137] = true
	} else if p.key.pid == "init" {
		p.allowed[2], p.allowed[143] = true, true
	} else {
		p.allowed[143] = true
	}
	c.mu.Unlock()
	ctx, cancel := rpcCtx()
	cl.Signal(ctx, &types.SignalRequest{Id: p.key.id, Pid: p.key.pid, Signal: uint32(sig)})
	cancel()
}

func (c *chaosRun) pauseResume(cl types.APIClient, x *ctr) {
	c.mu.Lock()
	wasPaused := x.paused
	c.mu.Unlock()
	ctx, cancel := rpcCtx()
	defer cancel()
	if !wasPaused {
		if _, err := cl.UpdateContainer(ctx, &types.UpdateContainerRequest{Id: x.id, Status: "paused"}); err != nil {
			return
		}
		c.mu.Lock()
		x.paused = true
		c.mu.Unlock()
		time.Sleep(time.Duration(10+c.intn(150)) * time.Millisecond)
	}
	if _, err := cl.UpdateContainer(ctx, &types.UpdateContainerRequest{Id: x.id, Status: "running"}); err == nil {
		c.mu.Lock()
		x.paused = false
		c.mu.Unlock()
	}
}

// crashAndRestart SIGKILLs the daemon, kills up to two container processes
// while it is down, and starts it again once the workers' failed calls
// have returned; then checks.
func (c *chaosRun) crashAndRestart() error {
	if err := c.d.Kill(); err != nil {
		return err
	}
	c.kills++
	c.killDirectly(c.intn(3))
	time.Sleep(time.Duration(c.intn(300)) * time.Millisecond)
	c.gate.Lock()
	defer c.gate.Unlock()
	if err := c.d.Start(); err != nil {
		return fmt.Errorf("restart %d: %w", c.kills, err)
	}
	return c.check(10*time.Second, false)
}

func (c *chaosRun) killDirectly(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var live []*proc
	for _, p := range c.procs {
		if p.state == started && !p.exited && p.pidfd >= 0 {
			live = append(live, p)
		}
	}
	for i := 0; i < n && len(live) > 0; i++ {
		k := c.rng.Intn(len(live))
		p := live[k]
		live = append(live[:k], live[k+1:]...)
		p.allowed[137] = true
		if unix.PidfdSendSignal(p.pidfd, unix.SIGKILL, nil, 0) == nil {
			c.direct++
		}
	}
}

// finish stops every container (resuming paused ones first), waits until
// the daemon and the runc root are empty, and makes the final check.
func (c *chaosRun) finish() error {
	ctx := context.Background()
	st, err := c.d.Client.State(ctx, &types.StateRequest{})
	if err != nil {
		return err
	}
	c.mu.Lock()
	for _, p := range c.procs {
		p.allowed[137] = true // everything still alive is SIGKILLed now
	}
	c.mu.Unlock()
	for _, x := range st.GetContainers() {
		c.d.Client.UpdateContainer(ctx, &types.UpdateContainerRequest{Id: x.Id, Status: "running"})
	}
	r := c.d.Runc()
	for _, id := range r.IDs() {
		r.Resume(ctx, id) // frozen behind the daemon's back by a crash mid-pause
	}
	for _, x := range st.GetContainers() {
		c.d.Client.Signal(ctx, &types.SignalRequest{Id: x.Id, Pid: "init", Signal: uint32(syscall.SIGKILL)})
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := c.d.Client.State(ctx, &types.StateRequest{})
		if err == nil && len(st.GetContainers()) == 0 && len(r.IDs()) == 0 {
			break
		}
		if time.Now().After(deadline) {
			c.s.cfg.Logf("chaos: containers still there 60 s after the final SIGKILL: listed %d, runc %v", len(st.GetContainers()), r.IDs())
			for _, id := range r.IDs() {
				// What the daemon said of it, across its restarts: the
				// run dir (and the log) is removed when the suite ends.
				c.s.cfg.Logf("chaos: the daemon's log lines on %s:\n%s", id, strings.Join(c.d.LogLines(id, 60), "\n"))
			}
			c.runcLeft = len(r.IDs())
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return c.check(30*time.Second, true)
}

func (c *chaosRun) closePidfds() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		if p.pidfd >= 0 {
			unix.Close(p.pidfd)
			p.pidfd = -1
		}
	}
}
