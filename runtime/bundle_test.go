package runtime_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/runtime"
	"golang.org/x/sys/unix"
)

// TestLoadNeverReadsTheBundle: after a daemon restart the container is
// rebuilt from the daemon's own state, whatever the client did to its
// bundle since the create: a config.json swapped for a FIFO (which would
// block a read) or for /dev/zero (which would never end) changes nothing,
// and an exec still works.
func TestLoadNeverReadsTheBundle(t *testing.T) {
	swaps := map[string]func(path string) error{
		"fifo":      func(p string) error { return unix.Mkfifo(p, 0o600) },
		"/dev/zero": func(p string) error { return os.Symlink("/dev/zero", p) },
	}
	for name, swap := range swaps {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			b := fixture.NewBundle(t, sleeper)
			opts := e.opts(fixture.UniqueID(t), b.Path)
			launch(t, opts)
			path := filepath.Join(b.Path, "config.json")
			must(t, os.Remove(path))
			must(t, swap(path))

			c := load(t, e.root, opts.ID)
			if c.Spec() == nil || !reflect.DeepEqual(c.Spec().Process.Args, b.Spec.Process.Args) {
				t.Fatalf("loaded spec %+v; want the init args %q kept from the create", c.Spec(), b.Spec.Process.Args)
			}
			p, err := c.Exec(context.Background(), "e1", execSpec("exit", "7"), runtime.Stdio{})
			if err != nil {
				t.Fatalf("Exec after Load: %v", err)
			}
			wantStatus(t, p, 7)
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
