// Package e2e tests the real binaries end to end: bin/containerd with real
// runc containers, driven through the gRPC client of the v0.2 API and
// through bin/ctr. Every test starts its own daemon on a private state dir
// and uses ids unique to the test, so the tests run in parallel.
//
// Under `go test -race` the daemon itself is also built with the race
// detector, and a data race it reports fails the test that drove it.
package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/integration/fixture"
)

// Bounds of the waits. A real container starts in well under a second; the
// bounds leave room for a loaded machine and the race detector.
const (
	rpcTimeout  = 30 * time.Second
	eventWait   = 30 * time.Second
	promptly    = 10 * time.Second // "promptly" of docs/api.md section 8, items 10 and 11
	ctrTimeout  = 60 * time.Second
	pollEvery   = 10 * time.Millisecond
	raceWarning = "WARNING: DATA RACE"
)

func TestMain(m *testing.M) {
	if raceEnabled && os.Getenv("CONTAINERD") == "" {
		// The daemon is built with -race too, so the end-to-end runs also
		// look for data races in the daemon.
		bin := filepath.Join(fixture.RepoRoot(), "bin", "containerd.race")
		tmp := fmt.Sprintf("%s.tmp%d", bin, os.Getpid())
		cmd := exec.Command("go", "build", "-race", "-o", tmp, "./containerd")
		cmd.Dir = fixture.RepoRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build the daemon with -race: %v\n%s", err, out)
			os.Exit(2)
		}
		if err := os.Rename(tmp, bin); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Setenv("CONTAINERD", bin)
	}
	fixture.Main(m)
}

// startDaemon starts a daemon of the test's own (extra daemon flags allowed)
// and checks, when the test ends, that it reported no data race.
func startDaemon(t *testing.T, flags ...string) *fixture.Daemon {
	t.Helper()
	fixture.RequireRoot(t)
	d := fixture.NewDaemon(t, flags...)
	d.Start()
	t.Cleanup(func() {
		if strings.Contains(d.Log.String(), raceWarning) {
			t.Errorf("the daemon reported a data race:\n%s", d.Log.String())
		}
	})
	return d
}

// restart starts d again after a Stop or Kill: the fixture's Start makes a
// new connection, so d.Client is usable again.
func restart(t *testing.T, d *fixture.Daemon) {
	t.Helper()
	d.Start()
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	t.Cleanup(cancel)
	return ctx
}

// ---- containers and processes ----

// create starts a container and fails the test on an error.
func create(t *testing.T, d *fixture.Daemon, id string, b *fixture.Bundle) *types.Container {
	t.Helper()
	return createReq(t, d, &types.CreateContainerRequest{Id: id, BundlePath: b.Path})
}

func createReq(t *testing.T, d *fixture.Daemon, req *types.CreateContainerRequest) *types.Container {
	t.Helper()
	resp, err := d.Client.CreateContainer(ctxT(t), req)
	if err != nil {
		t.Fatalf("CreateContainer %s: %v", req.Id, err)
	}
	return resp.GetContainer()
}

// startAndWait subscribes from now, creates the container and waits for its
// start-container, which must be its first event.
func startAndWait(t *testing.T, d *fixture.Daemon, id string, b *fixture.Bundle) (*fixture.Events, *types.Container) {
	t.Helper()
	evs := d.SubscribeAfter(time.Now(), id)
	c := create(t, d, id, b)
	evs.Expect("start-container " + id)
	return evs, c
}

// execReq is an AddProcess request running the test init with steps.
func execReq(id, pid string, steps ...string) *types.AddProcessRequest {
	return &types.AddProcessRequest{
		Id: id, Pid: pid, Args: append([]string{"/testinit"}, steps...),
		Cwd: "/", Env: []string{"PATH=/"}, User: &types.User{},
	}
}

// addProcess runs an exec and returns its host pid.
func addProcess(t *testing.T, d *fixture.Daemon, req *types.AddProcessRequest) int {
	t.Helper()
	resp, err := d.Client.AddProcess(ctxT(t), req)
	if err != nil {
		t.Fatalf("AddProcess %s/%s: %v", req.Id, req.Pid, err)
	}
	if resp.SystemPid == 0 {
		t.Fatalf("AddProcess %s/%s: systemPid 0", req.Id, req.Pid)
	}
	return int(resp.SystemPid)
}

func signal(t *testing.T, d *fixture.Daemon, id, pid string, sig syscall.Signal) {
	t.Helper()
	if _, err := d.Client.Signal(ctxT(t), &types.SignalRequest{Id: id, Pid: pid, Signal: uint32(sig)}); err != nil {
		t.Fatalf("Signal %s/%s %v: %v", id, pid, sig, err)
	}
}

// state returns the one container id, failing the test on an error.
func state(t *testing.T, d *fixture.Daemon, id string) *types.Container {
	t.Helper()
	resp, err := d.Client.State(ctxT(t), &types.StateRequest{Id: id})
	if err != nil {
		t.Fatalf("State %s: %v", id, err)
	}
	if len(resp.Containers) != 1 || resp.Containers[0].Id != id {
		t.Fatalf("State %s: got %d containers: %v", id, len(resp.Containers), resp.Containers)
	}
	return resp.Containers[0]
}

// process returns the process pid of c, or nil.
func process(c *types.Container, pid string) *types.Process {
	for _, p := range c.Processes {
		if p.Pid == pid {
			return p
		}
	}
	return nil
}

// initPid is the host pid of the container's init, from State.
func initPid(t *testing.T, d *fixture.Daemon, id string) int {
	t.Helper()
	c := state(t, d, id)
	p := process(c, "init")
	if p == nil || p.SystemPid == 0 {
		t.Fatalf("State %s: no init with a systemPid: %v", id, c.Processes)
	}
	return int(p.SystemPid)
}

// wantGone checks that State no longer knows id.
func wantGone(t *testing.T, d *fixture.Daemon, id string) {
	t.Helper()
	_, err := d.Client.State(ctxT(t), &types.StateRequest{Id: id})
	wantErr(t, "State of an exited container", err, codes.NotFound, "containerd: container not found")
}

// ---- host processes ----

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// waitCmdline waits until the live process pid runs the command line want.
// runc exec returns once the process is in the container, possibly just
// before its execve, so for a moment the pid still reads "runc init"; an
// execve has no event to await, hence the poll.
func waitCmdline(t *testing.T, pid int, want string) {
	t.Helper()
	deadline := time.Now().Add(promptly)
	for cmdline(pid) != want {
		if !alive(pid) || time.Now().After(deadline) {
			t.Fatalf("pid %d: alive %v, cmdline %q, want %q", pid, alive(pid), cmdline(pid), want)
		}
		time.Sleep(pollEvery)
	}
}

// kill signals a host pid directly (behind the daemon's back).
func kill(t *testing.T, pid int, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatalf("kill %d %v: %v", pid, sig, err)
	}
}

// waitDead waits until pid is gone (or a zombie), bounded.
func waitDead(t *testing.T, pid int) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return // ESRCH: gone already
	}
	defer unix.Close(fd)
	// A pidfd becomes readable when its process exits, child of ours or not.
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int(promptly.Milliseconds()))
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			t.Fatalf("pid %d (%s) still alive %s after it was killed (%v)", pid, cmdline(pid), promptly, err)
		}
		return
	}
}

// shimOf finds the shim holding process pid of container id: a process
// whose command line names containerd-shim and whose working directory is
// <state dir>/<id>/<pid>.
func shimOf(t *testing.T, d *fixture.Daemon, id, pid string) int {
	t.Helper()
	want := filepath.Join(d.StateDir, id, pid)
	entries, _ := os.ReadDir("/proc")
	var found []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if !strings.Contains(cmdline(n), "containerd-shim") {
			continue
		}
		if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", n)); err == nil && cwd == want {
			found = append(found, n)
		}
	}
	if len(found) != 1 {
		t.Fatalf("shims with cwd %s: %v, want exactly one", want, found)
	}
	return found[0]
}

// memoryCgroupFile is the path of file in the memory cgroup (v1) of pid.
func memoryCgroupFile(t *testing.T, pid int, file string) string {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) == 3 && parts[1] == "memory" {
			return filepath.Join("/sys/fs/cgroup/memory", parts[2], file)
		}
	}
	t.Fatalf("pid %d: no memory cgroup (v1) in /proc/%d/cgroup", pid, pid)
	return ""
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// noPidNamespace makes the container share the host pid namespace, so that
// its init (not a pid 1) dies of SIGTERM.
func noPidNamespace(t *testing.T, b *fixture.Bundle) {
	t.Helper()
	fixture.NoPidNamespace()(b.Spec)
	b.Write(t)
}

// ---- events ----

// stored returns the journaled events after the request's cursor
// (stored-only, so the stream ends with EOF).
func stored(t *testing.T, d *fixture.Daemon, req *types.EventsRequest) []*types.Event {
	t.Helper()
	req.StoredOnly = true
	stream, err := d.Client.Events(ctxT(t), req)
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	return fixture.Drain(t, stream)
}

// storedSince is stored() strictly after ts, for one id ("" = all).
func storedSince(t *testing.T, d *fixture.Daemon, ts *timestamppb.Timestamp, id string) []*types.Event {
	t.Helper()
	return stored(t, d, &types.EventsRequest{Timestamp: ts, Id: id})
}

// describeAll renders events in fixture.Describe's notation.
func describeAll(evs []*types.Event) []string {
	out := make([]string, 0, len(evs))
	for _, ev := range evs {
		out = append(out, fixture.Describe(ev))
	}
	return out
}

func wantEvents(t *testing.T, what string, got []*types.Event, want ...string) {
	t.Helper()
	g := describeAll(got)
	if strings.Join(g, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s:\n got  %q\n want %q", what, g, want)
	}
}

// expectSet reads len(want) events in any order and checks them as a
// multiset (events of different containers have no relative order).
func expectSet(t *testing.T, evs *fixture.Events, want ...string) []*types.Event {
	t.Helper()
	var got []*types.Event
	for range want {
		got = append(got, evs.Next(eventWait))
	}
	g := describeAll(got)
	w := append([]string(nil), want...)
	sort.Strings(g)
	sort.Strings(w)
	if strings.Join(g, "\n") != strings.Join(w, "\n") {
		t.Fatalf("events (any order):\n got  %q\n want %q", g, w)
	}
	return got
}

// index returns the position of the event described by desc, or -1.
func index(evs []*types.Event, desc string) int {
	for i, ev := range evs {
		if fixture.Describe(ev) == desc {
			return i
		}
	}
	return -1
}

// ---- errors ----

// wantErr checks a gRPC error's code and message. A message starting with
// "~" only has to be contained in the error's message; otherwise it must be
// exact (the v0.2 texts clients compare byte for byte).
func wantErr(t *testing.T, what string, err error, code codes.Code, msg string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want %v %q", what, code, msg)
		return
	}
	st, ok := status.FromError(err)
	if !ok {
		t.Errorf("%s: not a gRPC status: %v", what, err)
		return
	}
	if st.Code() != code {
		t.Errorf("%s: code %v (%q), want %v", what, st.Code(), short(st.Message()), code)
	}
	if sub, ok := strings.CutPrefix(msg, "~"); ok {
		if !strings.Contains(st.Message(), sub) {
			t.Errorf("%s: message %q, want it to contain %q", what, short(st.Message()), sub)
		}
	} else if st.Message() != msg {
		t.Errorf("%s: message %q, want %q", what, short(st.Message()), msg)
	}
}

// short cuts a message that may echo a huge input.
func short(s string) string {
	if len(s) > 500 {
		return s[:500] + fmt.Sprintf("... (%d bytes)", len(s))
	}
	return s
}

// ---- ctr ----

// ctrResult is one run of bin/ctr.
type ctrResult struct {
	stdout, stderr string
	code           int
}

// ctr runs bin/ctr against d, bounded by ctrTimeout, with stdin from
// /dev/null. It fails the test on a Go panic or runtime error trace.
func ctr(t *testing.T, d *fixture.Daemon, args ...string) ctrResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ctrTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, fixture.Ctr(t), append([]string{"--address", "unix://" + d.Socket}, args...)...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := ctrResult{stdout: out.String(), stderr: errOut.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("ctr %v: still running after %s\nstdout: %s\nstderr: %s", args, ctrTimeout, r.stdout, r.stderr)
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run ctr %v: %v", args, err)
	}
	for _, trace := range []string{"panic: ", "goroutine 1 [", "[signal SIG"} {
		if strings.Contains(r.stderr, trace) || strings.Contains(r.stdout, trace) {
			t.Errorf("ctr %v printed a Go trace (%q):\nstdout: %s\nstderr: %s", args, trace, r.stdout, r.stderr)
		}
	}
	return r
}

// ctrOK runs ctr and fails the test unless it exits 0.
func ctrOK(t *testing.T, d *fixture.Daemon, args ...string) string {
	t.Helper()
	r := ctr(t, d, args...)
	if r.code != 0 {
		t.Fatalf("ctr %v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// ---- FIFOs ----

func fifo(t *testing.T, dir, name string) (string, *os.File) { return fixture.Fifo(t, dir, name) }

func readUntil(t *testing.T, f *os.File, want string) string {
	return fixture.ReadUntil(t, f, want, eventWait)
}
