package e2e

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/evjournal/containerd/integration/fixture"
)

// TestDaemonFindsShimAndRuncBesideIt: a daemon started from a build dir
// with its default --runtime and --shim, that dir not on PATH (a new user
// running bin/containerd from the repo), runs containers with the shim and
// runc beside it, and its log names the ones it chose.
func TestDaemonFindsShimAndRuncBesideIt(t *testing.T) {
	t.Parallel()
	fixture.RequireRoot(t)
	bin := t.TempDir()
	for name, src := range map[string]string{"containerd": fixture.Containerd(t), "containerd-shim": fixture.Shim(t), "runc": fixture.Runc(t)} {
		if err := fixture.CopyFile(src, filepath.Join(bin, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	d := fixture.NewDaemon(t)
	d.Binary, d.DefaultBinaries = filepath.Join(bin, "containerd"), true
	d.Wrap = []string{"env", "PATH=" + t.TempDir()} // a PATH with neither binary on it
	d.Start()
	t.Cleanup(func() {
		if strings.Contains(d.Log.String(), raceWarning) {
			t.Errorf("the daemon reported a data race:\n%s", d.Log.String())
		}
	})

	id := fixture.UniqueID(t)
	evs, _ := startAndWait(t, d, id, fixture.NewBundle(t))
	signal(t, d, id, "init", syscall.SIGKILL)
	evs.Expect("exit " + id + " init 137")

	for what, path := range map[string]string{"runtime": filepath.Join(bin, "runc"), "shim": filepath.Join(bin, "containerd-shim")} {
		lines := d.Log.Lines(`msg="` + what + ` chosen"`)
		if len(lines) != 1 || !strings.Contains(lines[0], `from="beside the daemon"`) || !strings.Contains(lines[0], "path="+path+" ") &&
			!strings.HasSuffix(lines[0], "path="+path) {
			t.Errorf("the log's %q lines %q: want one naming %s, beside the daemon", what+" chosen", lines, path)
		}
	}
}
