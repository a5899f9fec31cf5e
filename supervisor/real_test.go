package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/specs"
	"github.com/evjournal/containerd/supervisor/journal"
)

// testSync is the journal sync policy of every supervisor the tests start
// ($SUPERVISOR_JOURNAL_SYNC, default batch): `make test` runs this package
// under each policy, so ordering, replay + live hand-off and subscribers
// are checked under all three.
var testSync = func() journal.SyncPolicy {
	v := os.Getenv("SUPERVISOR_JOURNAL_SYNC")
	if v == "" {
		return journal.SyncBatch
	}
	p, err := journal.ParseSyncPolicy(v)
	if err != nil {
		panic("SUPERVISOR_JOURNAL_SYNC: " + err.Error())
	}
	return p
}()

func TestMain(m *testing.M) {
	if os.Getenv(daemonRoleEnv) != "" {
		runDaemonRole()
		return
	}
	fixture.Main(m)
}

// daemonRoleEnv makes the test binary act as a short-lived daemon: it starts
// a supervisor, runs the script in the variable, prints the host pids it
// got and waits to be SIGKILLed. A real daemon's death leaves the shims to
// init, not to the test process, and that is what this reproduces.
const daemonRoleEnv = "SUPERVISOR_TEST_DAEMON"

type daemonScript struct {
	Config     Config            `json:"-"`
	StateDir   string            `json:"stateDir"`
	Runc       string            `json:"runc"`
	RuncRoot   string            `json:"runcRoot"`
	Shim       string            `json:"shim"`
	Containers map[string]string `json:"containers"` // id -> bundle
	Execs      map[string]string `json:"execs"`      // exec id -> container id
	// Stdio of the processes, by "id/init" or "id/exec"; none by default.
	Stdio map[string]runtime.Stdio `json:"stdio"`
}

func runDaemonRole() {
	var sc daemonScript
	if err := json.Unmarshal([]byte(os.Getenv(daemonRoleEnv)), &sc); err != nil {
		panic(err)
	}
	s, err := New(Config{StateDir: sc.StateDir, SyncPolicy: testSync, Runtime: sc.Runc, RuntimeArgs: []string{"--root", sc.RuncRoot}, Shim: sc.Shim})
	if err != nil {
		panic(err)
	}
	if err := s.Start(context.Background()); err != nil {
		panic(err)
	}
	ctx := context.Background()
	pids := map[string]int{}
	for id, bundle := range sc.Containers {
		info, err := s.CreateContainer(ctx, CreateRequest{ID: id, Bundle: bundle, Stdio: sc.Stdio[id+"/init"]})
		if err != nil {
			panic(err)
		}
		pids[id+"/init"] = info.Processes[0].SystemPid
	}
	for pid, id := range sc.Execs {
		spec := specs.ProcessSpec{Args: []string{"/testinit", "sleep", "forever"}, Cwd: "/", Env: []string{"PATH=/"}}
		syspid, err := s.Exec(ctx, ExecRequest{ID: id, Pid: pid, Spec: spec, Stdio: sc.Stdio[id+"/"+pid]})
		if err != nil {
			panic(err)
		}
		pids[id+"/"+pid] = syspid
	}
	json.NewEncoder(os.Stdout).Encode(pids)
	for {
		time.Sleep(time.Hour) // until SIGKILLed
	}
}

// realEnv is a state dir and runc root shared by the supervisors of one
// test, as a daemon's are across restarts.
type realEnv struct {
	t        *testing.T
	prefix   string // makes container ids unique to the test
	stateDir string
	runcRoot string
}

func newRealEnv(t *testing.T) *realEnv {
	fixture.RequireRoot(t)
	return &realEnv{t: t, stateDir: t.TempDir(), runcRoot: fixture.RuncRoot(t), prefix: fixture.UniqueID(t)}
}

func (env *realEnv) config() Config {
	return Config{StateDir: env.stateDir, SyncPolicy: testSync, Runtime: fixture.Runc(env.t), RuntimeArgs: []string{"--root", env.runcRoot},
		Shim: fixture.Shim(env.t), StartTimeout: 20 * time.Second}
}

// start runs a supervisor; the test's cleanup stops it (containers stay).
func (env *realEnv) start(cfg Config) *Supervisor {
	env.t.Helper()
	s, err := New(cfg)
	if err != nil {
		env.t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		env.t.Fatal(err)
	}
	env.t.Cleanup(func() { s.Stop() })
	return s
}

// id is the test-unique container id for a short name.
func (env *realEnv) id(name string) string { return env.prefix + "-" + name }

// short undoes id in an event description, so expectations stay readable.
func (env *realEnv) short(desc string) string { return strings.ReplaceAll(desc, env.prefix+"-", "") }

func execSleep(t *testing.T, s *Supervisor, id, pid string) int {
	t.Helper()
	spec := specs.ProcessSpec{Args: []string{"/testinit", "sleep", "forever"}, Cwd: "/", Env: []string{"PATH=/"}}
	syspid, err := s.Exec(context.Background(), ExecRequest{ID: id, Pid: pid, Spec: spec})
	if err != nil {
		t.Fatalf("exec %s in %s: %v", pid, id, err)
	}
	return syspid
}

// nextEvents reads n events (bounded wait each).
func nextEvents(t *testing.T, env *realEnv, sub *Subscription, n int) []string {
	t.Helper()
	var out []string
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		ev, err := sub.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("event %d of %d: %v (got so far %v)", i+1, n, err, out)
		}
		out = append(out, env.short(describe(ev)))
	}
	return out
}

func kill(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %d: %v", pid, err)
	}
}

// daemonDeathScenario runs a, b and c (a with exec e1) under a daemon in
// another process, SIGKILLs that daemon, then kills a's exec and a's and b's
// init while no daemon runs. c stays alive.
func daemonDeathScenario(t *testing.T, env *realEnv) {
	sc := daemonScript{StateDir: env.stateDir, Runc: fixture.Runc(t), RuncRoot: env.runcRoot, Shim: fixture.Shim(t),
		Containers: map[string]string{}, Execs: map[string]string{"e1": env.id("a")}}
	for _, name := range []string{"a", "b", "c"} {
		sc.Containers[env.id(name)] = fixture.NewBundle(t, fixture.Args("sleep", "forever")).Path
	}
	pids := runDaemonRoleOnce(t, sc)
	for _, k := range []string{"a/e1", "a/init", "b/init"} {
		kill(t, pids[env.id(k)])
	}
}

// runDaemonRoleOnce runs sc in a daemon of its own process, then SIGKILLs
// that daemon; it returns the host pids of the processes sc started (keys
// "id/init", "id/exec").
func runDaemonRoleOnce(t *testing.T, sc daemonScript) map[string]int {
	t.Helper()
	script, _ := json.Marshal(sc)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), daemonRoleEnv+"="+string(script))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pids map[string]int
	err = json.NewDecoder(out).Decode(&pids)
	cmd.Process.Kill()
	cmd.Wait()
	if err != nil {
		t.Fatalf("daemon role: %v", err)
	}
	return pids
}

func TestRealRestoreExactlyOnce(t *testing.T) {
	env := newRealEnv(t)
	daemonDeathScenario(t, env)
	s2 := env.start(env.config())
	sub, err := s2.Subscribe(context.Background(), SubscribeRequest{After: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	got := nextEvents(t, env, sub, 7)
	// The daemon created a, b and c concurrently: their order is free.
	starts := append([]string(nil), got[:3]...)
	sort.Strings(starts)
	want := []string{"start-container a", "start-container b", "start-container c"}
	if !equal(starts, want) || got[3] != "start-process a e1" {
		t.Fatalf("replayed %v, want %v then start-process a e1", got[:4], want)
	}
	assertExits(t, got[4:], "exit a e1 137", "exit a init 137", "exit b init 137")
	// c is still running and controllable: exec, then kill.
	infos, err := s2.State(context.Background(), env.id("c"))
	if err != nil || infos[0].Status != StatusRunning || len(infos[0].Pids) == 0 {
		t.Fatalf("c after restore: %+v %v", infos, err)
	}
	execSleep(t, s2, env.id("c"), "late")
	if err := s2.Signal(context.Background(), env.id("c"), "init", syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	assertExits(t, nextEvents(t, env, sub, 3)[1:], "exit c late 137", "exit c init 137")
}

// assertExits checks exits of different containers as a set, and that an
// exec's exit comes before its container's init exit.
func assertExits(t *testing.T, got []string, want ...string) {
	t.Helper()
	g := append([]string(nil), got...)
	w := append([]string(nil), want...)
	sort.Strings(g)
	sort.Strings(w)
	if !equal(g, w) {
		t.Fatalf("exits %v, want %v", got, want)
	}
	for i, e := range got {
		var id, pid string
		var status int
		fmtSscan(e, &id, &pid, &status)
		if pid != "init" {
			continue
		}
		for _, later := range got[i+1:] {
			var lid, lpid string
			fmtSscan(later, &lid, &lpid, &status)
			if lid == id {
				t.Fatalf("exec exit %q after init exit %q", later, e)
			}
		}
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// fmtSscan parses "exit ID PID STATUS".
func fmtSscan(s string, id, pid *string, status *int) {
	var typ string
	fmt.Sscan(s, &typ, id, pid, status)
}
