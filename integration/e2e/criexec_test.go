package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/internal/crashpoint"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestCRIExecSyncConcurrent: 20 ExecSyncs at once, in two containers of a
// pod (their exec starts run side by side, each from a spare shim or one
// started for it), each get their own stdout, stderr and exit code.
func TestCRIExecSyncConcurrent(t *testing.T) {
	t.Parallel()
	e := newCRIEnv(t)
	pod, podID, a := runSleeper(t, e, "exec-many", e.pushTestinit(t, "e2e/exec-many:1"), nil)
	b := addSleeper(t, e, pod, podID, "exec-many-b", nil)
	const n = 20
	errs := make(chan error, n)
	for i := range n {
		cid := a
		if i%4 == 3 {
			cid = b
		}
		go func() {
			r, err := execSync(t, e, cid, fmt.Sprintf("echo out%d -- stderr err%d -- exit %d", i, i, i+1))
			switch {
			case err != nil:
				errs <- fmt.Errorf("exec %d: %w", i, err)
			case string(r.Stdout) != fmt.Sprintf("out%d\n", i) || string(r.Stderr) != fmt.Sprintf("err%d\n", i) || r.ExitCode != int32(i+1):
				errs <- fmt.Errorf("exec %d: stdout %q, stderr %q, exit %d; want out%d, err%d, %d", i, r.Stdout, r.Stderr, r.ExitCode, i, i, i+1)
			default:
				errs <- nil
			}
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	removePod(t, e, podID)
}

// execWaiting starts an ExecSync that says it runs (a file made in the
// container's /tmp/sync, watched from the host) and then sleeps until
// killed; it returns once the exec runs, with the channel of its result.
func execWaiting(t *testing.T, e *criEnv, cid, name string) <-chan execResult {
	t.Helper()
	if ex, err := execSync(t, e, cid, "mkdir /tmp/sync"); err != nil || ex.ExitCode != 0 {
		t.Fatalf("mkdir /tmp/sync: %v %v", ex, err)
	}
	watch := fixture.WatchDir(t, filepath.Join(e.d.Dir, "root", "images", "containers", cid, "upper", "tmp", "sync"))
	done := make(chan execResult, 1)
	go func() {
		r, err := execSync(t, e, cid, "ready /tmp/sync/"+name+" -- sleep forever")
		done <- execResult{r, err}
	}()
	watch.Wait(t, eventWait, "the exec runs", func(ev fixture.DirEvent) bool { return ev.Created && ev.Name == name })
	// The process runs; runc exec may not have returned yet. Its shim writes
	// starttime once it has (a rename, which the watch does not report:
	// polled).
	deadline := time.Now().Add(eventWait)
	for {
		dirs := execDirs(e, cid)
		if len(dirs) == 1 {
			if _, err := os.Stat(filepath.Join(dirs[0], "starttime")); err == nil {
				return done
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the running exec's shim wrote no starttime: %v", dirs)
		}
		time.Sleep(pollEvery)
	}
}

type execResult struct {
	r   *runtimeapi.ExecSyncResponse
	err error
}

// TestCRIExecSyncReportsInitExit: an ExecSync whose command still runs
// when its container's init exits gets its exit code (137: the kernel
// kills the pid namespace with its init), and the container is EXITED.
func TestCRIExecSyncReportsInitExit(t *testing.T) {
	t.Parallel()
	e := newCRIEnv(t)
	_, podID, cid := runSleeper(t, e, "exec-init-exit", e.pushTestinit(t, "e2e/exec-init-exit:1"), nil)
	done := execWaiting(t, e, cid, "running")
	if _, err := e.rt.StopContainer(cctx(t), &runtimeapi.StopContainerRequest{ContainerId: cid, Timeout: 1}); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if res.err != nil || res.r.ExitCode != 137 {
			t.Fatalf("ExecSync running when its container stopped: %v, %v; want exit code 137", res.r, res.err)
		}
	case <-time.After(eventWait):
		t.Fatal("ExecSync did not return after its container stopped")
	}
	wantState(t, e, cid, runtimeapi.ContainerState_CONTAINER_EXITED)
	removePod(t, e, podID)
}

// spareShims are the idle spare shims of the daemon with pid daemon: its
// children started as `containerd-shim --spare` whose working directory
// is still "/" (a spare keeps its command line once assigned; its working
// directory is then its process's dir).
func spareShims(daemon int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || !strings.Contains(cmdline(pid), "containerd-shim --spare") {
			continue
		}
		if cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); cwd == "/" && ppidOf(pid) == daemon {
			out = append(out, pid)
		}
	}
	return out
}

// ppidOf is the parent of pid (0 if gone).
func ppidOf(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// execDirs are the process dirs of the ExecSyncs of container cid.
func execDirs(e *criEnv, cid string) []string {
	dirs, _ := filepath.Glob(filepath.Join(e.d.StateDir, cid, "execsync-*"))
	return dirs
}

// waitNoExecLeft waits, bounded, until container cid has no ExecSync dir
// and no process has its working directory in one (a shim), polling:
// things that are gone send no event.
func waitNoExecLeft(t *testing.T, e *criEnv, cid string) {
	t.Helper()
	deadline := time.Now().Add(eventWait)
	for {
		dirs := execDirs(e, cid)
		var procs []string
		for pid, desc := range fixture.Referring(filepath.Join(e.d.StateDir, cid)) {
			if pid != e.d.Pid() && strings.Contains(desc, "execsync-") {
				procs = append(procs, desc)
			}
		}
		if len(dirs) == 0 && len(procs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("left of the exec after the restart: dirs %v, processes %v", dirs, procs)
		}
		time.Sleep(pollEvery)
	}
}

// TestCRIExecSyncDaemonKilled: a daemon SIGKILLed while an ExecSync runs
// leaves nothing once restarted: the exec (never journaled) and its shim
// are killed, its dir removed; the old daemon's idle spare shims exit by
// themselves (their assignment socket hung up). Exec works afterwards.
func TestCRIExecSyncDaemonKilled(t *testing.T) {
	t.Parallel()
	e := newCRIEnv(t)
	_, podID, cid := runSleeper(t, e, "exec-killed", e.pushTestinit(t, "e2e/exec-killed:1"), nil)
	done := execWaiting(t, e, cid, "running")
	var pids []int
	for _, dir := range execDirs(e, cid) {
		for _, f := range []string{"pid", "shim.pid"} {
			data, _ := os.ReadFile(filepath.Join(dir, f))
			if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	if len(pids) != 2 {
		t.Fatalf("the running exec's pid and shim.pid: %v in %v", pids, execDirs(e, cid))
	}
	spares := spareShims(e.d.Pid())
	if len(spares) == 0 {
		t.Fatal("the daemon keeps no spare shim after an exec")
	}
	e.d.Kill()
	for _, pid := range spares {
		waitDead(t, pid)
	}
	if res := <-done; res.err == nil {
		t.Fatalf("ExecSync through a daemon killed under it: %v, want an error", res.r)
	}
	restart(t, e.d)
	for _, pid := range pids {
		waitDead(t, pid)
	}
	waitNoExecLeft(t, e, cid)
	if r, err := execSync(t, e, cid, "echo again"); err != nil || string(r.Stdout) != "again\n" {
		t.Fatalf("ExecSync after the restart: %v %v", r, err)
	}
	removePod(t, e, podID)
}

// TestCRIExecStartCrash: a daemon that dies just after it gave an exec's
// process to a shim (crash point loop-start:after-shim-spawn, its third
// time: the pause's, the container's, the exec's) leaves nothing once
// restarted: that shim, which went on to run runc exec, and what it
// started are killed and the exec's dir removed; the container runs on.
func TestCRIExecStartCrash(t *testing.T) {
	t.Parallel()
	e := prepareCRIEnv(t)
	e.d.Binary = fixture.ContainerdFailpoints(t, raceEnabled)
	e.d.Wrap = []string{"env", crashpoint.Env + "=loop-start:after-shim-spawn#3"}
	e.start(t)
	_, podID, cid := runSleeper(t, e, "exec-crash", e.pushTestinit(t, "e2e/exec-crash:1"), nil)
	_, err := execSync(t, e, cid, "echo never")
	wantCRICode(t, "ExecSync through a daemon that died in its start", err, codes.Unavailable)
	select {
	case <-e.d.Exited():
	case <-time.After(eventWait):
		t.Fatal("the daemon did not die at the crash point")
	}
	e.d.Wrap = nil // the restarted daemon runs on
	restart(t, e.d)
	waitNoExecLeft(t, e, cid)
	wantState(t, e, cid, runtimeapi.ContainerState_CONTAINER_RUNNING)
	if r, err := execSync(t, e, cid, "echo again -- exit 3"); err != nil || string(r.Stdout) != "again\n" || r.ExitCode != 3 {
		t.Fatalf("ExecSync after the restart: %v %v", r, err)
	}
	removePod(t, e, podID)
}
