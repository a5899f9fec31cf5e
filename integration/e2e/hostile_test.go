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
