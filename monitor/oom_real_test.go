package monitor

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evjournal/containerd/integration/fixture"
	"golang.org/x/sys/unix"
)

const (
	v1Memory   = "/sys/fs/cgroup/memory"
	v2Unified  = "/sys/fs/cgroup/unified"
	limitBytes = "16777216" // 16 MiB
)

// A real OOM kill in a real cgroup v1: exactly one OOM report, before the
// victim's exit; the watch is dropped when the cgroup is removed.
func TestV1RealOOMKill(t *testing.T) {
	fixture.RequireRoot(t)
	if _, err := os.Stat(filepath.Join(v1Memory, "memory.oom_control")); err != nil {
		t.Skipf("skipping: no cgroup v1 memory controller at %s: %v", v1Memory, err)
	}
	dir := makeCgroup(t, v1Memory)
	writeCgroup(t, dir, "memory.limit_in_bytes", limitBytes)
	writeCgroupIfPresent(t, dir, "memory.memsw.limit_in_bytes", limitBytes) // no escape to swap
	runOOMKill(t, OOMSource{ID: "oom-v1", V1Dir: dir}, dir)
}

// The same on cgroup v2, where the machine's cgroup2 mount has the memory
// controller.
func TestV2RealOOMKill(t *testing.T) {
	fixture.RequireRoot(t)
	root := v2Root(t)
	if !hasController(root, "memory") {
		t.Skipf("skipping: the memory controller is not enabled on this machine's cgroup2 mount %s (cgroup.controllers: %q)",
			root, readTrim(filepath.Join(root, "cgroup.controllers")))
	}
	writeCgroup(t, root, "cgroup.subtree_control", "+memory")
	dir := makeCgroup(t, root)
	writeCgroup(t, dir, "memory.max", limitBytes)
	writeCgroupIfPresent(t, dir, "memory.swap.max", "0")
	runOOMKill(t, OOMSource{ID: "oom-v2", V2Dir: dir}, dir)
}

// kernfs sends no IN_DELETE_SELF for a removed cgroup's files; the monitor
// learns of the rmdir from IN_DELETE on the parent. Tried on the real cgroup2
// mount with cgroup.events, which every v2 cgroup has, in place of
// memory.events, which needs the memory controller.
func TestV2RealCgroupRemovalDropsWatch(t *testing.T) {
	fixture.RequireRoot(t)
	root := v2Root(t)
	dir := makeCgroup(t, root)
	m := newMonitor(t, withV2File("cgroup.events"))
	if err := m.MonitorOOM(OOMSource{ID: "v2-rmdir", V2Dir: dir}); err != nil {
		t.Fatal(err)
	}
	removeCgroup(t, dir)
	waitFor(t, "the watch of the removed cgroup to be dropped", func() bool { return m.Count() == 0 })
}

// runOOMKill starts an allocator in the cgroup dir under a 16 MiB limit and
// checks the reports: one OOM, then the exit, then the watch's drop at rmdir.
func runOOMKill(t *testing.T, src OOMSource, dir string) {
	testinit := fixture.Testinit(t)
	m := newMonitor(t)
	if err := m.MonitorOOM(src); err != nil {
		t.Fatalf("MonitorOOM: %v", err)
	}
	child := startAllocator(t, m, dir, testinit)
	got := []string{next(t, m)}
	if got[0] == "oom:"+src.ID {
		got = append(got, next(t, m))
	}
	child.reap(t)
	removeCgroup(t, dir)
	got = append(got, drainUntilCount(t, m, 0)...)
	want := []string{"oom:" + src.ID, exitName(child.fd)}
	if !slices.Equal(got, want) {
		t.Fatalf("reports = %v, want exactly %v (one OOM, before the exit); child stderr: %s", got, want, child.stderr.String())
	}
}

// allocator is a child in a memory cgroup whose exit is the hang-up of a
// pipe only it holds the write end of.
type allocator struct {
	cmd    *exec.Cmd
	fd     int
	stderr bytes.Buffer
}

func startAllocator(t *testing.T, m *Monitor, dir, testinit string) *allocator {
	r, w := pipe(t)
	t.Cleanup(func() { unix.Close(r) })
	a := &allocator{fd: r}
	if err := m.Monitor(fdSource(r)); err != nil {
		t.Fatal(err)
	}
	wf := os.NewFile(uintptr(w), "exit-pipe")
	// The shell joins the cgroup, then becomes the allocator: all its memory
	// is charged there, and the pipe's write end (fd 3) goes with it.
	a.cmd = exec.Command("/bin/sh", "-c", `echo $$ > "$0/cgroup.procs" && exec "$1" alloc`, dir, testinit)
	a.cmd.ExtraFiles = []*os.File{wf}
	a.cmd.Stderr = &a.stderr
	err := a.cmd.Start()
	wf.Close()
	if err != nil {
		t.Fatalf("start allocator: %v", err)
	}
	t.Cleanup(func() {
		if a.cmd.ProcessState == nil {
			a.cmd.Process.Kill()
			a.cmd.Wait()
		}
	})
	return a
}

// reap waits for the allocator and checks the OOM killer is what ended it.
func (a *allocator) reap(t *testing.T) {
	err := a.cmd.Wait()
	ws, _ := a.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("allocator ended by %v, want SIGKILL from the OOM killer; stderr: %s", err, a.stderr.String())
	}
}

// drainUntilCount collects reports until Count reaches n: a report still
// queued before the watch's drop would be received by then.
func drainUntilCount(t *testing.T, m *Monitor, n int) []string {
	var got []string
	deadline := time.After(waitLimit)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for m.Count() != n {
		select {
		case id := <-m.OOMs():
			got = append(got, "oom:"+id)
		case p := <-m.Exits():
			got = append(got, exitName(p.ExitFD()))
		case <-tick.C:
		case <-deadline:
			t.Fatalf("Count stayed %d, want %d within %v (reports meanwhile: %v)", m.Count(), n, waitLimit, got)
		}
	}
	return got
}

// makeCgroup creates a uniquely named cgroup under root, removed at cleanup.
func makeCgroup(t *testing.T, root string) string {
	dir := filepath.Join(root, "monitor-test-"+fixture.UniqueID(t))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("create cgroup: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Rmdir(dir); err != nil && !errors.Is(err, unix.ENOENT) {
			t.Errorf("cleanup: rmdir %s: %v", dir, err)
		}
	})
	return dir
}

// removeCgroup rmdirs dir. The kernel may answer EBUSY for a moment after
// the last task was reaped, so this retries within a bound.
func removeCgroup(t *testing.T, dir string) {
	deadline := time.Now().Add(waitLimit)
	for {
		err := unix.Rmdir(dir)
		if err == nil {
			return
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			t.Fatalf("rmdir %s: %v", dir, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func writeCgroup(t *testing.T, dir, file, value string) {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
		t.Fatalf("write %s to %s: %v", value, file, err)
	}
}

func writeCgroupIfPresent(t *testing.T, dir, file, value string) {
	if _, err := os.Stat(filepath.Join(dir, file)); err == nil {
		writeCgroup(t, dir, file, value)
	}
}

// v2Root is the cgroup2 mount: the hybrid layout's unified dir, or
// /sys/fs/cgroup itself on a pure v2 machine.
func v2Root(t *testing.T) string {
	for _, p := range []string{v2Unified, "/sys/fs/cgroup"} {
		var st unix.Statfs_t
		if unix.Statfs(p, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
			return p
		}
	}
	t.Skip("skipping: no cgroup2 mount at /sys/fs/cgroup/unified or /sys/fs/cgroup")
	return ""
}

func hasController(root, name string) bool {
	return slices.Contains(strings.Fields(readTrim(filepath.Join(root, "cgroup.controllers"))), name)
}

func readTrim(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return strings.TrimSpace(string(data))
}
