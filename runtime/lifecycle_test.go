package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/specs"
)

// TestExitStatus runs containers to their exit and checks the status the
// shim records, in the shell convention.
func TestExitStatus(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name   string
		opts   []fixture.Option
		signal syscall.Signal
		want   uint32
	}{
		{"exit 0", []fixture.Option{fixture.Args("exit", "0")}, 0, 0},
		{"exit 3", []fixture.Option{fixture.Args("exit", "3")}, 0, 3},
		{"SIGKILL", []fixture.Option{sleeper}, syscall.SIGKILL, 137},
		// A pid-namespace init ignores SIGTERM (no default action for it), so
		// this init shares the host pid namespace.
		{"SIGTERM", []fixture.Option{sleeper, noPidNS}, syscall.SIGTERM, 143},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, p := e.run(t, fixture.NewBundle(t, tc.opts...), runtime.Stdio{})
			if tc.signal != 0 {
				if got := status(t, c); got != "running" {
					t.Fatalf("status before the signal = %q, want running", got)
				}
				if err := p.Signal(tc.signal); err != nil {
					t.Fatalf("Signal: %v", err)
				}
			}
			wantStatus(t, p, tc.want)
			if p.State() != runtime.Stopped {
				t.Fatalf("state after exit = %v", p.State())
			}
		})
	}
}

func TestExec(t *testing.T) {
	e := newEnv(t)
	c, initp := e.run(t, fixture.NewBundle(t, sleeper), runtime.Stdio{})
	ctx := context.Background()
	p, err := c.Exec(ctx, "e1", execSpec("exit", "5"), runtime.Stdio{})
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	wantStatus(t, p, 5)
	if err := p.CloseStdin(); !errdefs.IsFailedPrecondition(err) {
		t.Fatalf("CloseStdin of an exited process: %v", err)
	}
	begin := time.Now()
	if st, reason := initp.ExitStatus(); st != 255 || reason == "" || time.Since(begin) > time.Second {
		t.Fatalf("ExitStatus of a running init: %d %q after %v, want 255 with a reason at once", st, reason, time.Since(begin))
	}
	if got := c.Processes(); len(got) != 2 || got[0].ID() != "init" || got[1].ID() != "e1" {
		t.Fatalf("Processes = %v, want init then e1", ids(got))
	}
	if err := c.RemoveProcess("e1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(c.Dir(), "e1")); !os.IsNotExist(err) {
		t.Fatalf("exec dir after RemoveProcess: %v", err)
	}
	if initp.State() != runtime.Running {
		t.Fatal("init stopped with the exec")
	}
}

func ids(ps []*runtime.Process) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.ID())
	}
	return out
}

func TestPauseResume(t *testing.T) {
	e := newEnv(t)
	c, _ := e.run(t, fixture.NewBundle(t, sleeper), runtime.Stdio{})
	ctx := context.Background()
	if err := c.Pause(ctx); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if got := status(t, c); got != "paused" {
		t.Fatalf("status after Pause = %q", got)
	}
	if err := c.Pause(ctx); err == nil {
		t.Fatal("pausing a paused container succeeded")
	}
	if err := c.Resume(ctx); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if got := status(t, c); got != "running" {
		t.Fatalf("status after Resume = %q", got)
	}
}

// TestUpdateMemory raises the memory limit and reads it back from the
// container's cgroup v1 memory dir, found by OOMCgroups.
func TestUpdateMemory(t *testing.T) {
	e := newEnv(t)
	c, _ := e.run(t, fixture.NewBundle(t, sleeper, fixture.MemoryLimit(64<<20)), runtime.Stdio{})
	v1, _ := c.OOMCgroups()
	if v1 == "" || !strings.HasPrefix(v1, "/sys/fs/cgroup/memory/") {
		t.Fatalf("OOMCgroups v1 dir = %q", v1)
	}
	if got := readInt(t, filepath.Join(v1, "memory.limit_in_bytes")); got != 64<<20 {
		t.Fatalf("limit before update = %d", got)
	}
	limit := int64(128 << 20)
	err := c.UpdateResources(context.Background(), &specs.LinuxResources{Memory: &specs.LinuxMemory{Limit: &limit, Swap: &limit}})
	if err != nil {
		t.Fatalf("UpdateResources: %v", err)
	}
	if got := readInt(t, filepath.Join(v1, "memory.limit_in_bytes")); got != limit {
		t.Fatalf("limit after update = %d, want %d", got, limit)
	}
}

func readInt(t *testing.T, path string) int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestStatsAndPids(t *testing.T) {
	e := newEnv(t)
	c, p := e.run(t, fixture.NewBundle(t, sleeper), runtime.Stdio{})
	ctx := context.Background()
	st, err := c.Stats(ctx)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if st.Memory.Usage.Usage == 0 || st.Pids.Current == 0 || st.SystemUsage == 0 || st.Timestamp.IsZero() {
		t.Fatalf("stats: memory usage %d, pids %d, system usage %d, time %v: want all non-zero",
			st.Memory.Usage.Usage, st.Pids.Current, st.SystemUsage, st.Timestamp)
	}
	pids, err := c.Pids(ctx)
	if err != nil {
		t.Fatalf("Pids: %v", err)
	}
	if len(pids) == 0 || !contains(pids, p.SystemPid()) {
		t.Fatalf("Pids = %v, want it to hold init's pid %d", pids, p.SystemPid())
	}
	// Pids reads the cgroup itself; it must agree with `runc ps`.
	out, err := exec.Command(e.runc, "--root", e.runcRoot, "ps", "--format", "json", c.ID()).Output()
	if err != nil {
		t.Fatalf("runc ps: %v", err)
	}
	var want []int
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatalf("runc ps output %q: %v", out, err)
	}
	sort.Ints(pids)
	sort.Ints(want)
	if !reflect.DeepEqual(pids, want) {
		t.Fatalf("Pids = %v, runc ps = %v", pids, want)
	}
}

func contains(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// TestConcurrentExecs: execs start from several workers while another
// goroutine (the loop) reads the process table; -race checks the access.
func TestConcurrentExecs(t *testing.T) {
	e := newEnv(t)
	c, _ := e.run(t, fixture.NewBundle(t, sleeper), runtime.Stdio{})
	stop := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			select {
			case <-stop:
				return
			default:
				for _, p := range c.Processes() {
					p.State()
				}
			}
		}
	}()
	results := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func(i int) {
			p, err := c.Exec(context.Background(), "x"+strconv.Itoa(i), execSpec("exit", strconv.Itoa(10+i)), runtime.Stdio{})
			if err == nil {
				if st, _ := waitExitNoFatal(p); st != uint32(10+i) {
					err = fmt.Errorf("exec %d: status %d", i, st)
				}
			}
			results <- err
		}(i)
	}
	for i := 0; i < 4; i++ {
		if err := <-results; err != nil {
			t.Error(err)
		}
	}
	close(stop)
	<-readerDone
	if n := len(c.Processes()); n != 5 {
		t.Fatalf("%d processes, want init and 4 execs", n)
	}
}

func waitExitNoFatal(p *runtime.Process) (uint32, string) {
	if !runtime.WaitHangup(p.ExitFD(), waitLimit) {
		return 255, "timeout"
	}
	return p.ExitStatus()
}
