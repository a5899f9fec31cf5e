package supervisor

// The exit path on real shims and runc: an exit is
// published at the reap, whatever the container's stdout, the daemon's other
// work or the execs left behind, exactly once and with its real status.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/supervisor/journal"
)

// liveSub subscribes to the events from now on.
func liveSub(t *testing.T, s *Supervisor) *Subscription {
	t.Helper()
	sub, err := s.Subscribe(context.Background(), SubscribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

func createReal(t *testing.T, s *Supervisor, r CreateRequest) ContainerInfo {
	t.Helper()
	info, err := s.CreateContainer(context.Background(), r)
	if err != nil {
		t.Fatalf("create %s: %v", r.ID, err)
	}
	return info
}

// shimPidfd opens a pidfd on the shim of process pid of container id: the
// test can then see whether that shim is still there, and wait for its end.
func shimPidfd(t *testing.T, env *realEnv, id, pid string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(env.stateDir, id, pid, "shim.pid"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatalf("shim.pid: %v", err)
	}
	fd, err := unix.PidfdOpen(n, 0)
	if err != nil {
		t.Fatalf("pidfd of shim %d: %v", n, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// exited waits up to limit for the process behind pidfd to exit.
func exited(pidfd int, limit time.Duration) bool {
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	deadline := time.Now().Add(limit)
	for {
		n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds()))
		if err == nil {
			return n > 0
		}
		if !errors.Is(err, unix.EINTR) {
			return false
		}
	}
}

// waitIdle waits until the per-id work queues are empty: the deletes after
// the exits are done, so no runc the test caused outlives it. No event says
// a step's result was applied on the loop, so this polls.
func waitIdle(t *testing.T, s *Supervisor) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for loopValue(t, s, func(s *Supervisor) int { return len(s.queues) }) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("container work still queued 30s after the last exit")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// journalExitsOnce checks, on the whole journal, that every exit (container,
// process, incarnation) is there once and none is a made-up 255; it returns
// the exits in journal order.
func journalExitsOnce(t *testing.T, env *realEnv, s *Supervisor) []string {
	t.Helper()
	sub, err := s.Subscribe(context.Background(), SubscribeRequest{After: time.Unix(0, 0), StoredOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	var exits []string
	for {
		ev, err := sub.Next(context.Background())
		if err != nil {
			break
		}
		if ev.Type != journal.TypeExit {
			continue
		}
		d := env.short(describe(ev))
		exits = append(exits, d)
		if seen[ev.ID+"/"+ev.Pid+"/"+ev.Incarnation]++; seen[ev.ID+"/"+ev.Pid+"/"+ev.Incarnation] > 1 {
			t.Errorf("exit of %s %s (incarnation %s) journaled twice: %v", ev.ID, ev.Pid, ev.Incarnation, exits)
		}
		if ev.Status == runtime.StatusUnknown {
			t.Errorf("made-up status in %q", d)
		}
	}
	return exits
}

// TestRealUnreadStdoutDoesNotHoldExit: a container whose stdout FIFO is full
// and never read is killed: its exit reaches a live subscriber while its
// shim still holds the unread output (the exit does not wait for the shim's
// bounded drain), and the id is reusable at once.
func TestRealUnreadStdoutDoesNotHoldExit(t *testing.T) {
	env := newRealEnv(t)
	s := env.start(env.config())
	sub := liveSub(t, s)
	id := env.id("flood")
	stdout, _ := fixture.Fifo(t, t.TempDir(), "stdout") // held open, never read
	info := createReal(t, s, CreateRequest{ID: id, Bundle: fixture.NewBundle(t, fixture.Args("flood")).Path,
		Stdio: runtime.Stdio{Stdout: stdout}})
	pid := info.Processes[0].SystemPid
	// Once killed, the process leaves its shim more output than the FIFO
	// has room for: the shim holds it for its whole drain bound (5 s).
	fixture.WaitBacklog(t, stdout, fmt.Sprintf("/proc/%d/fd/1", pid), 16<<10, 20*time.Second)
	fixture.WaitBlockedWriting(t, pid, 20*time.Second)
	shim := shimPidfd(t, env, id, "init")
	t.Cleanup(func() {
		if !exited(shim, 20*time.Second) { // it gives the output up within its 5 s bound
			t.Error("the shim of the flooding container is still there 20s after its exit")
		}
	})

	start := time.Now()
	kill(t, pid)
	got := nextEvents(t, env, sub, 2)
	took := time.Since(start)
	if !equal(got, []string{"start-container flood", "exit flood init 137"}) {
		t.Fatalf("events %v, want start-container then exit 137", got)
	}
	if exited(shim, 0) {
		t.Fatalf("the exit was published %s after the kill, once the shim was gone: it waited for the unread output", took)
	}
	t.Logf("kill -9 to exit event: %s, the shim still draining", took)

	// The id is free at once, while the old shim still drains.
	createReal(t, s, CreateRequest{ID: id, Bundle: fixture.NewBundle(t).Path})
	if err := s.Signal(context.Background(), id, "init", syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if got := nextEvents(t, env, sub, 2); !equal(got, []string{"start-container flood", "exit flood init 137"}) {
		t.Fatalf("the id's new incarnation: %v", got)
	}
	journalExitsOnce(t, env, s)
	waitIdle(t, s)
}

// TestRealExecOutlivingInit: in a container without a pid namespace an exec
// outlives its init. Killing the init gives the exec's exit with its real
// status (the daemon kills it: 137, not a made-up 255), then the init's,
// exactly once; the id is reusable afterwards.
func TestRealExecOutlivingInit(t *testing.T) {
	env := newRealEnv(t)
	s := env.start(env.config())
	sub := liveSub(t, s)
	id := env.id("g")
	info := createReal(t, s, CreateRequest{ID: id, Bundle: fixture.NewBundle(t, fixture.NoPidNamespace()).Path})
	execPid := execSleep(t, s, id, "e1")
	kill(t, info.Processes[0].SystemPid)
	got := nextEvents(t, env, sub, 4)
	if !equal(got, []string{"start-container g", "start-process g e1", "exit g e1 137", "exit g init 137"}) {
		t.Fatalf("events %v, want the exec's exit (137) then the init's", got)
	}
	if fixture.Alive(execPid) {
		t.Fatalf("exec %d still running after its container's exit was published", execPid)
	}
	// No second init exit: the next event is the new incarnation's start.
	createReal(t, s, CreateRequest{ID: id, Bundle: fixture.NewBundle(t).Path})
	if err := s.Signal(context.Background(), id, "init", syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if got := nextEvents(t, env, sub, 2); !equal(got, []string{"start-container g", "exit g init 137"}) {
		t.Fatalf("after the reuse: %v", got)
	}
	if exits := journalExitsOnce(t, env, s); len(exits) != 3 {
		t.Fatalf("journal exits %v, want 3", exits)
	}
	waitIdle(t, s)
}

// TestRealRestoreRetiredWithRunningExec: the daemon died after retiring a
// container whose init had exited (host pid namespace), before publishing
// the exit, while an exec of it still runs. The restarted daemon publishes
// the exec's real exit (it kills it: 137, never a made-up 255), then the
// init's, each once.
func TestRealRestoreRetiredWithRunningExec(t *testing.T) {
	env := newRealEnv(t)
	id := env.id("r")
	sc := daemonScript{StateDir: env.stateDir, Runc: fixture.Runc(t), RuncRoot: env.runcRoot, Shim: fixture.Shim(t),
		Containers: map[string]string{id: fixture.NewBundle(t, fixture.NoPidNamespace()).Path},
		Execs:      map[string]string{"e1": id}}
	pids := runDaemonRoleOnce(t, sc)
	execPid := pids[id+"/e1"]
	// The init dies while no daemon runs; its shim records the status.
	initShim := shimPidfd(t, env, id, "init")
	kill(t, pids[id+"/init"])
	if !exited(initShim, 20*time.Second) {
		t.Fatal("the init's shim did not exit within 20s of the init's death")
	}
	// The daemon's exit handling retired the container, then it died
	// before the exit was published.
	c, err := realRuntime{}.Load(env.stateDir, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Retire(); err != nil {
		t.Fatal(err)
	}
	for _, p := range c.Processes() {
		p.Close()
	}
	if !fixture.Alive(execPid) {
		t.Fatal("the exec is not running: the test needs it alive at restore")
	}

	s := env.start(env.config())
	sub, err := s.Subscribe(context.Background(), SubscribeRequest{After: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	got := nextEvents(t, env, sub, 4)
	if !equal(got, []string{"start-container r", "start-process r e1", "exit r e1 137", "exit r init 137"}) {
		t.Fatalf("events %v, want the exec's real exit (137) then the init's", got)
	}
	if fixture.Alive(execPid) {
		t.Fatalf("exec %d still running after restore published its exit", execPid)
	}
	if exits := journalExitsOnce(t, env, s); len(exits) != 2 {
		t.Fatalf("journal exits %v, want 2", exits)
	}
	// The id is free: a new container of it runs and exits.
	createReal(t, s, CreateRequest{ID: id, Bundle: fixture.NewBundle(t).Path})
	if err := s.Signal(context.Background(), id, "init", syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if got := nextEvents(t, env, sub, 2); !equal(got, []string{"start-container r", "exit r init 137"}) {
		t.Fatalf("after the reuse: %v", got)
	}
	waitIdle(t, s)
}

// hangingRuntime writes a runtime wrapper that runs runc, except that a
// create first says "hung" on the returned ready FIFO, then waits until the
// test closes the gate (the returned function). The daemon's probe of the
// runtime's features (`create --help`) does not hang.
func hangingRuntime(t *testing.T) (path string, ready *os.File, release func()) {
	t.Helper()
	dir := t.TempDir()
	readyPath, ready := fixture.Fifo(t, dir, "ready")
	gatePath, gate := fixture.Fifo(t, dir, "gate")
	path = filepath.Join(dir, "runtime")
	script := fmt.Sprintf(`#!/bin/sh
case " $* " in
*" --help "*) ;;
*" create "*)
	echo hung > %q
	cat %q > /dev/null
	;;
esac
exec %q "$@"
`, readyPath, gatePath, fixture.Runc(t))
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { gate.Close() }) }
	t.Cleanup(release) // before the supervisor stops: cleanups run last first
	return path, ready, release
}

// readHung waits until n creates said they hang.
func readHung(t *testing.T, ready *os.File, n int, limit time.Duration) {
	t.Helper()
	ready.SetReadDeadline(time.Now().Add(limit))
	var got strings.Builder
	buf := make([]byte, 256)
	for strings.Count(got.String(), "hung\n") < n {
		k, err := ready.Read(buf)
		got.Write(buf[:k])
		if err != nil {
			t.Fatalf("%d of %d creates hung in the runtime: %v", strings.Count(got.String(), "hung\n"), n, err)
		}
	}
}

// TestRealExitsNotHeldByHungCreates: with the runtime lane's every worker
// held by a create hung in the runtime, 20 unrelated containers are killed:
// all 20 exits are published while the creates still hang.
func TestRealExitsNotHeldByHungCreates(t *testing.T) {
	env := newRealEnv(t)
	cfg := env.config()
	cfg.StartTimeout = 2 * time.Minute // the creates hang for as long as the test says
	s := env.start(cfg)
	const running, hung = 20, 10 // hung = the runtime lane's workers (Config.Workers' default)
	initPids := make([]int, running)
	var wg sync.WaitGroup
	for i := range initPids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			info, err := s.CreateContainer(context.Background(), CreateRequest{ID: env.id(fmt.Sprintf("x%d", i)), Bundle: fixture.NewBundle(t).Path})
			if err != nil {
				t.Errorf("create x%d: %v", i, err)
				return
			}
			initPids[i] = info.Processes[0].SystemPid
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	rt, ready, release := hangingRuntime(t)
	results := make(chan error, hung)
	for i := 0; i < hung; i++ {
		go func() {
			_, err := s.CreateContainer(context.Background(), CreateRequest{ID: env.id(fmt.Sprintf("h%d", i)),
				Bundle: fixture.NewBundle(t).Path, Runtime: rt, RuntimeArgs: []string{"--root", env.runcRoot}})
			results <- err
		}()
	}
	readHung(t, ready, hung, 60*time.Second)

	sub := liveSub(t, s)
	start := time.Now()
	var want []string
	for i, pid := range initPids {
		kill(t, pid)
		want = append(want, fmt.Sprintf("exit x%d init 137", i))
	}
	got := nextEvents(t, env, sub, running)
	t.Logf("%d exits published %s after the kills, %d creates hung in the runtime", running, time.Since(start), hung)
	assertExits(t, got, want...)
	select {
	case err := <-results:
		t.Fatalf("a hung create returned before the runtime answered: %v", err)
	default:
	}

	// The creates go on once the runtime answers; then they are killed.
	release()
	want = want[:0]
	for i := 0; i < hung; i++ {
		if err := <-results; err != nil {
			t.Fatalf("create after the runtime answered: %v", err)
		}
	}
	for i := 0; i < hung; i++ {
		if err := s.Signal(context.Background(), env.id(fmt.Sprintf("h%d", i)), "init", syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("exit h%d init 137", i))
	}
	var exits []string
	for _, ev := range nextEvents(t, env, sub, 2*hung) {
		if strings.HasPrefix(ev, "exit ") {
			exits = append(exits, ev)
		}
	}
	assertExits(t, exits, want...)
	journalExitsOnce(t, env, s)
	waitIdle(t, s)
}
