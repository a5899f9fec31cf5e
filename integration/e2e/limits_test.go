package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/specs"
)

// startDaemonWith starts a daemon prepared by setup (see fixture.Daemon's
// Wrap and Runtime) and checks, when the test ends, that it reported no
// data race.
func startDaemonWith(t *testing.T, setup func(d *fixture.Daemon)) *fixture.Daemon {
	t.Helper()
	fixture.RequireRoot(t)
	d := fixture.NewDaemon(t)
	setup(d)
	d.Start()
	t.Cleanup(func() {
		if strings.Contains(d.Log.String(), raceWarning) {
			t.Errorf("the daemon reported a data race:\n%s", d.Log.String())
		}
	})
	return d
}

// recordingRuntime writes a runtime that appends its soft RLIMIT_NOFILE and
// its command to log, then execs the real runc with its arguments.
func recordingRuntime(t *testing.T, log string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "runc-recording")
	script := fmt.Sprintf("#!/bin/sh\necho \"$(ulimit -Sn) $*\" >> %s\nexec %s \"$@\"\n", log, fixture.Runc(t))
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// nofile returns the soft and hard RLIMIT_NOFILE of pid, as /proc shows them.
func nofile(t *testing.T, pid int) (soft, hard string) {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			f := strings.Fields(rest)
			if len(f) >= 2 {
				return f[0], f[1]
			}
		}
	}
	t.Fatalf("/proc/%d/limits: no 'Max open files' line:\n%s", pid, data)
	return "", ""
}

// TestChildrenGetTheDaemonsNofile: the daemon does not raise RLIMIT_NOFILE
// for its children. Started with a soft limit of 777, it runs with a raised
// one (Go raises its own and restores 777 in what it starts), and every
// runtime command, those the daemon runs and those its shims run (create,
// exec), starts with 777: what the daemon was given.
//
// What the container processes get from there is the runtime's doing (and
// the bundle's rlimits): runc 1.5.2 built with today's Go hands a created
// init hard-1 when the bundle sets no RLIMIT_NOFILE, also when run by hand
// without any daemon; so the test looks at the runtime's own limit.
func TestChildrenGetTheDaemonsNofile(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "runtime.log")
	d := startDaemonWith(t, func(d *fixture.Daemon) {
		d.Wrap = []string{"/bin/sh", "-c", `ulimit -Sn 777 && exec "$0" "$@"`}
		d.Runtime = recordingRuntime(t, log)
	})
	if soft, _ := nofile(t, d.Pid()); soft == "777" {
		t.Fatalf("the daemon runs with the soft limit it was given (777): Go did not raise it, nothing to check")
	}
	id := fixture.UniqueID(t)
	startAndWait(t, d, id, fixture.NewBundle(t, func(s *specs.Spec) { s.Process.Rlimits = nil }))
	addProcess(t, d, execReq(id, "e1", "sleep", "forever"))

	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var saw []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		limit, cmd, _ := strings.Cut(line, " ")
		if limit != "777" {
			t.Errorf("runtime command %q ran with a soft RLIMIT_NOFILE of %s, want 777", cmd, limit)
		}
		for _, sub := range []string{"create", "start", "exec"} {
			if strings.Contains(" "+cmd+" ", " "+sub+" ") {
				saw = append(saw, sub)
			}
		}
	}
	if got := strings.Join(saw, ","); !strings.Contains(got, "create") || !strings.Contains(got, "exec") || !strings.Contains(got, "start") {
		t.Errorf("runtime commands recorded: %q; want create, start and exec (all run by shims) among them", got)
	}
}

// oomScoreAdj reads /proc/<pid>/oom_score_adj.
func oomScoreAdj(t *testing.T, pid int) string {
	t.Helper()
	return readTrim(t, fmt.Sprintf("/proc/%d/oom_score_adj", pid))
}

// TestShimOOMScoreAdj: a shim's oom_score_adj is the daemon's + 1 (capped at
// 1000), so the OOM killer picks a shim before the daemon; the container
// (its spec sets no process.oomScoreAdj) inherits the shim's. Checked for an
// init's shim, for an exec's shim, and at the cap; with the value of the
// shipped unit (OOMScoreAdjust=-999) where the test may lower the daemon's
// value (CAP_SYS_RESOURCE), else from 500 (raising needs no privilege).
func TestShimOOMScoreAdj(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	setDaemon := func(v int) error {
		return os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", d.Pid()), []byte(strconv.Itoa(v)), 0)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	base := fixture.UniqueID(t)
	a, b := base+"-a", base+"-b"

	daemon, want := -999, "-998"
	if err := setDaemon(daemon); errors.Is(err, os.ErrPermission) {
		t.Logf("cannot lower the daemon's oom_score_adj here (no CAP_SYS_RESOURCE): checking from 500")
		daemon, want = 500, "501"
		must(setDaemon(daemon))
	} else {
		must(err)
	}
	startAndWait(t, d, a, fixture.NewBundle(t))
	if got := oomScoreAdj(t, shimOf(t, d, a, "init")); got != want {
		t.Errorf("init's shim under a daemon at %d: oom_score_adj %s, want %s", daemon, got, want)
	}
	// runc 1.0.0-rc2 writes the spec's value (0 when unset) itself.
	if got := oomScoreAdj(t, initPid(t, d, a)); got != want && !fixture.OldRuntime() {
		t.Errorf("container init: oom_score_adj %s, want the shim's %s", got, want)
	}

	must(setDaemon(1000))
	startAndWait(t, d, b, fixture.NewBundle(t))
	if got := oomScoreAdj(t, shimOf(t, d, b, "init")); got != "1000" {
		t.Errorf("shim under a daemon at 1000: oom_score_adj %s, want 1000 (the cap)", got)
	}

	must(setDaemon(100))
	addProcess(t, d, execReq(a, "e1", "sleep", "forever"))
	if got := oomScoreAdj(t, shimOf(t, d, a, "e1")); got != "101" {
		t.Errorf("exec's shim under a daemon at 100: oom_score_adj %s, want 101", got)
	}
}

// TestExecsBoundedPerContainer: what one container's execs add to a State
// reply is bounded, with real runc: execs whose args and env fill the 1 MiB
// a container may add run; the next is refused with ResourceExhausted
// naming the container and the bound, while State still answers; once one
// has exited the refused exec fits.
func TestExecsBoundedPerContainer(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := fixture.UniqueID(t)
	evs, _ := startAndWait(t, d, id, fixture.NewBundle(t))
	big := func(pid string) *types.AddProcessRequest {
		req := execReq(id, pid, "sleep", "forever")
		// Two strings of 110 KiB: under the kernel's 128 KiB per string
		// and the API's 256 KiB per exec; four such execs fit in 1 MiB,
		// five do not.
		req.Env = append(req.Env, "A="+strings.Repeat("a", 110<<10), "B="+strings.Repeat("b", 110<<10))
		return req
	}
	for i := 0; i < 4; i++ {
		addProcess(t, d, big(fmt.Sprintf("big%d", i)))
		evs.Expect(fmt.Sprintf("start-process %s big%d", id, i))
	}
	_, err := d.Client.AddProcess(ctxT(t), big("big4"))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), id) || !strings.Contains(err.Error(), "1048576") {
		t.Fatalf("fifth big exec: %v, want ResourceExhausted naming the container and the 1048576-byte bound", err)
	}
	if c := state(t, d, id); len(c.Processes) != 5 {
		t.Fatalf("State lists %d processes, want init and 4 execs", len(c.Processes))
	}
	signal(t, d, id, "big0", syscall.SIGKILL)
	evs.Expect(fmt.Sprintf("exit %s big0 137", id))
	addProcess(t, d, big("big4"))
	evs.Expect(fmt.Sprintf("start-process %s big4", id))
}
