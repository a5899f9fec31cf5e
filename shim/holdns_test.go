package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/evjournal/containerd/integration/fixture"
)

// heldNamespaces lists the mount namespaces (as "mnt:[inode]") pid holds
// through its fds.
func heldNamespaces(t *testing.T, pid int) []string {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var held []string
	for _, e := range entries {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(l, "mnt:") {
			held = append(held, l)
		}
	}
	return held
}

// TestInitShimHoldsTheMountNamespace: the init's shim holds the container's
// mount namespace (so the container's exit does not tear it down before
// the reap); an exec's shim holds none. Once the init exited, its status
// is reported (the hold ends with the shim).
func TestInitShimHoldsTheMountNamespace(t *testing.T) {
	fixture.RequireRoot(t)
	t.Parallel()
	c := newContainer(t, fixture.Args("sleep", "1h"))
	defer c.remove(t)
	init, pid := c.runInit(t)

	theirs, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	ours, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	if theirs == ours {
		t.Fatalf("the container shares the host's mount namespace %s: the bundle must ask for its own", ours)
	}
	if held := heldNamespaces(t, init.shimPid); len(held) != 1 || held[0] != theirs {
		t.Fatalf("the init's shim holds mount namespaces %v, want only the container's %s", held, theirs)
	}

	e := c.startShim(t, procOpts{name: "exec1", exec: execProcess("sleep", "1h")})
	epid := e.started()
	if held := heldNamespaces(t, e.shimPid); len(held) != 0 {
		t.Fatalf("an exec's shim holds mount namespaces %v, want none", held)
	}
	if err := syscall.Kill(epid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if got := e.exited(); got != 137 {
		t.Fatalf("exec exitStatus %d, want 137", got)
	}
	c.mustRunc(t, "kill", c.id, "KILL")
	if got := init.exited(); got != 137 {
		t.Fatalf("init exitStatus %d, want 137", got)
	}
}
