package server

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/integration/fixture"
)

// wantMode fails unless path has this mode and group.
func wantMode(t *testing.T, path string, mode os.FileMode, gid int) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if got := os.FileMode(st.Mode).Perm(); got != mode || (gid >= 0 && int(st.Gid) != gid) {
		t.Errorf("%s: mode %v gid %d, want %v gid %d", path, got, st.Gid, mode, gid)
	}
}

// TestReachableFromUserNS: a user-namespaced pod's own dirs on the way to
// its rootfs are given to the pod's group, 0710; nothing above them is
// changed, and one that others cannot search is named, not opened.
func TestReachableFromUserNS(t *testing.T) {
	fixture.RequireRoot(t) // chown
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		os.Chmod(d, 0o711) // the test's own temp dirs
	}
	parent := filepath.Join(base, "root", "cri", "sandboxes")
	own := filepath.Join(parent, "pod1")
	rootfs := filepath.Join(own, "bundle", "rootfs")
	if err := os.MkdirAll(parent, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(rootfs, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := reachableFromUserNS(own, rootfs, 4242); err != nil {
		t.Fatal(err)
	}
	wantMode(t, own, 0o710, 4242)
	wantMode(t, filepath.Join(own, "bundle"), 0o710, 4242)
	wantMode(t, rootfs, 0o700, 0) // the caller's
	for _, d := range []string{parent, filepath.Dir(parent), filepath.Join(base, "root")} {
		wantMode(t, d, 0o711, 0)
	}

	closed := filepath.Join(base, "root")
	os.Chmod(closed, 0o700)
	err := reachableFromUserNS(own, rootfs, 4242)
	if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "searchable by others, and "+closed+" is -rwx------") {
		t.Fatalf("under a 0700 dir: %v, want FailedPrecondition naming %s", err, closed)
	}
	wantMode(t, closed, 0o700, 0)
	if err := reachableFromUserNS(own, "/elsewhere/rootfs", 4242); err == nil {
		t.Fatal("a rootfs outside the pod's dir was accepted")
	}
}

// TestOpenLayout: at start --root, the CRI root and its sandboxes/ are
// set to 0711 (search, no listing), whatever they were.
func TestOpenLayout(t *testing.T) {
	e := newEnv(t)
	dirs := []string{e.cfg.DataRoot, e.cfg.Root, filepath.Join(e.cfg.Root, "sandboxes")}
	for _, d := range dirs {
		wantMode(t, d, 0o711, -1)
		os.Chmod(d, 0o755)
	}
	e.restart()
	for _, d := range dirs {
		wantMode(t, d, 0o711, -1)
	}
}
