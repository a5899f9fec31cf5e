package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/integration/fixture"
)

// heldCreateRuntime is runc, except that `create` first writes its pid to
// the file entered, then waits for the file proceed before it runs runc
// create: a create the test can hold inside the runtime while it kills the
// daemon. The wrapper's pid is gone once runc create has returned (or once
// the wrapper was killed); runc create's status is then in entered.created.
func heldCreateRuntime(t *testing.T) (runtime, entered, proceed string) {
	t.Helper()
	dir := t.TempDir()
	// Named runc, as the daemon then knows where its --root is.
	runtime, entered, proceed = filepath.Join(dir, "runc"), filepath.Join(dir, "entered"), filepath.Join(dir, "proceed")
	script := fmt.Sprintf(`#!/bin/bash
case " $* " in *" --help "*) exec %[1]s "$@" ;; esac # a probe of create's flags, not a create
for a in "$@"; do
	if [ "$a" = create ]; then
		echo $$ > %[2]s.tmp && mv %[2]s.tmp %[2]s
		for i in $(seq 3000); do [ -e %[3]s ] && break; sleep 0.01; done
		%[1]s "$@"
		rc=$?
		echo $rc > %[2]s.created
		exit $rc
	fi
done
exec %[1]s "$@"
`, fixture.Runc(t), entered, proceed)
	if err := os.WriteFile(runtime, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return runtime, entered, proceed
}

// TestCrashDuringRuntimeCreateLeavesNothing: the daemon is SIGKILLed while a
// container's shim is inside `runc create`. The restarted daemon abandons
// that create (its start was never acknowledged) while the shim, which
// outlived the daemon, goes on with it: whichever ends first (the daemon's
// cleanup, or the create, which fails once the process dir holding its pid
// file and log is gone), neither the daemon nor the runc root holds the
// container afterwards.
// (chaos once found a container left in the runc root, in about fifty runs;
// this is one crash point it may have hit.)
func TestCrashDuringRuntimeCreateLeavesNothing(t *testing.T) {
	t.Parallel()
	rt, entered, proceed := heldCreateRuntime(t)
	d := startDaemonWith(t, func(d *fixture.Daemon) { d.Runtime = rt })
	id := fixture.UniqueID(t)
	b := fixture.NewBundle(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go d.Client.CreateContainer(ctx, &types.CreateContainerRequest{Id: id, BundlePath: b.Path}) // answered by nobody: the daemon dies
	var wrapper int
	for deadline := time.Now().Add(rpcTimeout); ; time.Sleep(10 * time.Millisecond) {
		if data, err := os.ReadFile(entered); err == nil {
			if wrapper, err = strconv.Atoi(strings.TrimSpace(string(data))); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the runtime's create was never entered")
		}
	}
	d.Kill()
	cancel()
	restart(t, d)
	if err := os.WriteFile(proceed, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitDead(t, wrapper) // runc create has returned, or the wrapper was killed
	if _, err := os.ReadFile(entered + ".created"); err != nil {
		t.Fatalf("the held runc create never ran after the restart (%v): nothing was tested", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st, err := d.Client.State(ctxT(t), &types.StateRequest{Id: id})
		listed := err == nil && len(st.GetContainers()) > 0
		_, err = os.Stat(filepath.Join(d.RuncRoot, id))
		inRunc := err == nil
		if !listed && !inRunc {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the runtime's create returned: listed by the daemon %v, in the runc root %v\ndaemon log:\n%s",
				listed, inRunc, d.Log.String())
		}
	}
}
