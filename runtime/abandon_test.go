package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/runtime"
)

// TestDeleteAbandonedWaitsForTheShim: the daemon died while a container's
// shim was inside runc create (held by the runtime, a wrapper of runc).
// The shim outlives the daemon and goes on with the create once it is let
// go. DeleteAbandoned must not finish while that shim runs (Delete did: it
// found no runc state yet, removed the dir and returned, and a create that
// completed then ran a container nobody knew of): it returns once the
// create's container is killed and deleted and the shim is gone, and then
// nothing of the container is left.
func TestDeleteAbandonedWaitsForTheShim(t *testing.T) {
	e := newEnv(t)
	rt, entered, proceed := heldCreate(t, e.runc)
	opts := e.opts(fixture.UniqueID(t), fixture.NewBundle(t, sleeper).Path)
	opts.Runtime = rt
	killLauncherInsideCreate(t, opts, entered)
	c, err := runtime.Load(e.root, opts.ID)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.DeleteAbandoned(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("DeleteAbandoned returned (%v) while the shim is inside runc create", err)
	case <-time.After(1500 * time.Millisecond): // nothing to await: it must not return
	}
	if _, err := os.Stat(c.Dir()); err != nil {
		t.Fatalf("the container's dir went while its shim runs: %v", err)
	}
	if err := os.WriteFile(proceed, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("DeleteAbandoned: %v", err)
		}
	case <-time.After(2 * waitLimit):
		t.Fatal("DeleteAbandoned did not return once the create went on")
	}
	if _, err := os.Stat(c.Dir()); !os.IsNotExist(err) {
		t.Fatalf("the container's dir is left: %v", err)
	}
	if ids := runcIDs(t, e); slices.Contains(ids, opts.ID) {
		t.Fatalf("runc still has %s", opts.ID)
	}
}

// heldCreate is runc whose create waits for the file proceed, after
// writing the file entered.
func heldCreate(t *testing.T, runc string) (rt, entered, proceed string) {
	dir := t.TempDir()
	rt, entered, proceed = filepath.Join(dir, "runc"), filepath.Join(dir, "entered"), filepath.Join(dir, "proceed")
	script := fmt.Sprintf(`#!/bin/sh
case " $* " in *" --help "*) exec %[1]s "$@" ;; esac
case " $* " in *" create "*)
	touch %[2]s
	while [ ! -e %[3]s ]; do sleep 0.01; done ;;
esac
exec %[1]s "$@"
`, runc, entered, proceed)
	if err := os.WriteFile(rt, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return rt, entered, proceed
}

// killLauncherInsideCreate runs a stand-in daemon creating the container
// and SIGKILLs it once the create is inside the runtime.
func killLauncherInsideCreate(t *testing.T, opts runtime.ContainerOpts, entered string) {
	t.Helper()
	data, _ := json.Marshal(opts)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), launcherEnv+"="+string(data))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	deadline := time.Now().Add(waitLimit)
	for {
		if _, err := os.Stat(entered); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the create did not reach the runtime")
		}
		time.Sleep(10 * time.Millisecond) // a file to poll: no event says it
	}
}

func runcIDs(t *testing.T, e *env) []string {
	out, err := exec.Command(e.runc, "--root", e.runcRoot, "list", "-q").Output()
	if err != nil {
		t.Fatalf("runc list: %v", err)
	}
	return strings.Fields(string(out))
}
