package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/integration/fixture"
)

// TestStdioNewFileAndReadOnlyStdin: an output path that does not exist yet
// is created 0600 and gets the output of both stdout and stderr; a regular
// file as stdin is read, never written.
func TestStdioNewFileAndReadOnlyStdin(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := fixture.UniqueID(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "input")
	os.WriteFile(in, []byte("from a host file\n"), 0o644)
	out := filepath.Join(dir, "out.log")
	evs := d.SubscribeAfter(time.Now(), id)
	b := fixture.NewBundle(t, fixture.Args("cat", "--", "stderr", "to stderr", "--", "exit", "3"))
	createReq(t, d, &types.CreateContainerRequest{Id: id, BundlePath: b.Path, Stdin: in, Stdout: out, Stderr: out})
	evs.Expect("start-container "+id, "exit "+id+" init 3")

	st, err := os.Lstat(out)
	if err != nil || st.Mode() != 0o600 {
		t.Fatalf("output file: %v, mode %v; want a new 0600 file", err, st.Mode())
	}
	// Two copies write the one file: each line whole, in either order.
	if data, _ := os.ReadFile(out); string(data) != "from a host file\nto stderr\n" && string(data) != "to stderr\nfrom a host file\n" {
		t.Errorf("output %q", data)
	}
	if data, _ := os.ReadFile(in); string(data) != "from a host file\n" {
		t.Errorf("stdin file now %q", data)
	}
}

// TestRuntimeFailingAtOnce: a create naming a runtime that fails at once
// returns the runtime's own stderr text (no client stderr path given); its
// id is free again after a bounded cleanup, also when the daemon is killed
// before that cleanup and restarted.
func TestRuntimeFailingAtOnce(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	good := fixture.NewBundle(t)
	script := filepath.Join(t.TempDir(), "says-no")
	os.WriteFile(script, []byte("#!/bin/sh\necho 'says-no: this runtime refuses everything' >&2\nexit 1\n"), 0o755)

	id := fixture.UniqueID(t)
	_, err := d.Client.CreateContainer(ctxT(t), &types.CreateContainerRequest{Id: id, BundlePath: good.Path, Runtime: script})
	wantErr(t, "create with a runtime that fails", err, codes.Internal, "~says-no: this runtime refuses everything")
	_, err = d.Client.CreateContainer(ctxT(t), &types.CreateContainerRequest{Id: id, BundlePath: good.Path, Runtime: "/bin/false"})
	wantErr(t, "create with /bin/false", err, codes.Internal, "~failed with status 1")
	startAndWait(t, d, id, good) // waits behind the bounded cleanup
	signal(t, d, id, "init", syscall.SIGKILL)

	again := fixture.UniqueID(t)
	_, err = d.Client.CreateContainer(ctxT(t), &types.CreateContainerRequest{Id: again, BundlePath: good.Path, Runtime: "/bin/false"})
	wantErr(t, "create with /bin/false", err, codes.Internal, "~failed with status 1")
	d.Kill()
	restart(t, d)
	startAndWait(t, d, again, good)
	if !strings.Contains(d.Log.String(), "the runtime cannot delete a container that never started") {
		t.Error("no log line says why the cleanup gave up")
	}
	signal(t, d, again, "init", syscall.SIGKILL)
}

// TestCtrStoppedDaemon: against a daemon that is stopped (SIGSTOP), ctr
// says that the daemon did not answer within its timeout, at once.
func TestCtrStoppedDaemon(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	kill(t, d.Pid(), syscall.SIGSTOP)
	t.Cleanup(func() { syscall.Kill(d.Pid(), syscall.SIGCONT) })
	r := ctr(t, d, "--conn-timeout", "2s", "containers", "list")
	if r.code == 0 || !strings.Contains(r.stderr, "did not answer within 2s") {
		t.Fatalf("ctr against a stopped daemon: exit %d, stderr %q", r.code, r.stderr)
	}
	kill(t, d.Pid(), syscall.SIGCONT)
	ctrOK(t, d, "containers", "list")
}

// TestStateUnderChurn: while containers start and exit all the time, every
// State of all containers answers (one that ends during the call is
// reported as it was, or left out).
func TestStateUnderChurn(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	b := fixture.NewBundle(t, fixture.Args("exit", "0"))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("%s-%d-%d", fixture.UniqueID(t), w, i)
				if _, err := d.Client.CreateContainer(ctxT(t), &types.CreateContainerRequest{Id: id, BundlePath: b.Path}); err != nil {
					t.Errorf("create %s: %v", id, err)
					return
				}
			}
		}()
	}
	polls, deadline := 0, time.Now().Add(3*time.Second)
	for ; time.Now().Before(deadline); polls++ {
		if _, err := d.Client.State(ctxT(t), &types.StateRequest{}); err != nil {
			t.Errorf("State during churn (poll %d): %v", polls, err)
			break
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d polls", polls)
}

// TestRestoreDamagedState: live containers whose state files were damaged
// while the daemon was down are adopted, not set aside: a garbage or FIFO
// state.json (rebuilt from runc's state and the journal), a garbage
// process.json and shim.pid (taken from the live processes), an exit FIFO
// replaced by a regular file (its exit is caught by reconcile, within one
// interval). A paused container is reported paused. Each exit afterwards
// is published exactly once.
func TestRestoreDamagedState(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "--reconcile-interval", "1s")
	base := fixture.UniqueID(t)
	ids := map[string]string{}
	all := d.SubscribeAfter(time.Now(), "")
	var starts []string
	for _, k := range []string{"garbage", "fifo", "files", "exitfile", "paused"} {
		ids[k] = base + "-" + k
		create(t, d, ids[k], fixture.NewBundle(t))
		starts = append(starts, "start-container "+ids[k])
	}
	expectSet(t, all, starts...)
	if _, err := d.Client.UpdateContainer(ctxT(t), &types.UpdateContainerRequest{Id: ids["paused"], Status: "paused"}); err != nil {
		t.Fatal(err)
	}
	last := all.Expect("pause " + ids["paused"])[0]
	pids := map[string]int{}
	for k, id := range ids {
		pids[k] = initPid(t, d, id)
	}
	d.Kill()

	dir := func(k string, parts ...string) string {
		return filepath.Join(append([]string{d.StateDir, ids[k]}, parts...)...)
	}
	os.WriteFile(dir("garbage", "state.json"), []byte("\x00{torn"), 0o600)
	os.Remove(dir("fifo", "state.json"))
	if err := syscall.Mkfifo(dir("fifo", "state.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(dir("files", "init", "process.json"), []byte("{torn"), 0o600)
	os.WriteFile(dir("files", "init", "shim.pid"), []byte("garbage"), 0o600)
	os.Remove(dir("exitfile", "init", "exit"))
	os.WriteFile(dir("exitfile", "init", "exit"), nil, 0o600)

	restart(t, d)
	for k, id := range ids {
		want := "running"
		if k == "paused" {
			want = "paused"
		}
		if c := state(t, d, id); c.Status != want || int(process(c, "init").GetSystemPid()) != pids[k] {
			t.Errorf("%s after the restart: %s, init %d; want %s with init %d", k, c.Status, process(c, "init").GetSystemPid(), want, pids[k])
		}
	}
	if _, err := d.Client.UpdateContainer(ctxT(t), &types.UpdateContainerRequest{Id: ids["paused"], Status: "running"}); err != nil {
		t.Fatal(err)
	}
	resumed := d.SubscribeAfter(last.Timestamp.AsTime(), "")
	resumed.Expect("resume " + ids["paused"])
	var exits []string
	for _, id := range ids {
		signal(t, d, id, "init", syscall.SIGKILL)
		exits = append(exits, "exit "+id+" init 137")
	}
	expectSet(t, resumed, exits...)
	got := storedSince(t, d, last.Timestamp, "")
	if len(got) != len(exits)+1 {
		t.Errorf("journal after the restart: %q, want the resume and one exit each", describeAll(got))
	}
	if strings.Contains(d.Log.String(), "set aside") {
		t.Errorf("a container was set aside:\n%s", d.Log.String())
	}
	// What restore recovers from is warned about, not reported as errors.
	if strings.Contains(d.Log.String(), "cannot monitor restored process") {
		t.Errorf("an exit FIFO that is not a FIFO logged as an error:\n%s", d.Log.String())
	}
}

// TestStartedEvidenceSurvivesCompaction: a running container whose started
// marker is missing (it could not be written) and whose start-container
// event was compacted away is kept at restart, not killed as an
// interrupted create.
func TestStartedEvidenceSurvivesCompaction(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "--retain-count", "10")
	id := fixture.UniqueID(t)
	evs, _ := startAndWait(t, d, id, fixture.NewBundle(t))
	pid := initPid(t, d, id)
	marker := filepath.Join(d.StateDir, id, "started")
	for deadline := time.Now().Add(rpcTimeout); ; time.Sleep(10 * time.Millisecond) { // written just after the reply
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no started marker")
		}
	}
	os.Remove(marker)
	for i := 0; i < 45; i++ { // 90 events: past the compaction threshold (10 + 64)
		for _, st := range []string{"paused", "running"} {
			if _, err := d.Client.UpdateContainer(ctxT(t), &types.UpdateContainerRequest{Id: id, Status: st}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if stored(t, d, &types.EventsRequest{StoredOnly: true, Timestamp: &timestamppb.Timestamp{}, Id: id})[0].Type == "start-container" {
		t.Fatal("the start-container event was not compacted away")
	}
	d.Kill()
	restart(t, d)
	if c := state(t, d, id); c.Status != "running" || initPid(t, d, id) != pid {
		t.Fatalf("after the restart: %s, init %d; want running with init %d", c.Status, initPid(t, d, id), pid)
	}
	evs.Close()
	after := d.SubscribeAfter(time.Now(), id)
	signal(t, d, id, "init", syscall.SIGKILL)
	after.Expect("exit " + id + " init 137")
}
