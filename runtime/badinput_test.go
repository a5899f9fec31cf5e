package runtime_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/runtime"
)

// TestNewRejects: bad input to New is classified and leaves nothing on disk.
func TestNewRejects(t *testing.T) {
	bundle := fixture.NewBundle(t).Path
	badJSON := t.TempDir()
	os.WriteFile(filepath.Join(badJSON, "config.json"), []byte("{not json"), 0o600)
	missing := filepath.Join(t.TempDir(), "gone")
	for _, tc := range []struct {
		name, id, bundle string
		class            error
		text             string // exact text, when v0.2 fixes it
	}{
		{"empty id", "", bundle, errdefs.ErrInvalidArgument, ""},
		{"dot-dot slash", "../x", bundle, errdefs.ErrInvalidArgument, ""},
		{"slash", "a/b", bundle, errdefs.ErrInvalidArgument, ""},
		{"dot", ".", bundle, errdefs.ErrInvalidArgument, ""},
		{"dot-dot", "..", bundle, errdefs.ErrInvalidArgument, ""},
		{"300 chars", strings.Repeat("a", 300), bundle, errdefs.ErrInvalidArgument, ""},
		{"NUL", "a\x00b", bundle, errdefs.ErrInvalidArgument, ""},
		{"relative bundle", "ok", "rel/bundle", errdefs.ErrInvalidArgument, ""},
		{"missing bundle", "ok", missing, errdefs.ErrNotFound, "open " + missing + "/config.json: no such file or directory"},
		{"invalid config.json", "ok", badJSON, errdefs.ErrInvalidArgument, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			_, err := runtime.New(runtime.ContainerOpts{Root: root, ID: tc.id, Bundle: tc.bundle})
			if !errors.Is(err, tc.class) {
				t.Fatalf("New: %v, want class %v", err, tc.class)
			}
			if tc.text != "" && err.Error() != tc.text {
				t.Fatalf("New: %q, want exactly %q", err, tc.text)
			}
			if tc.name == "invalid config.json" && !strings.Contains(err.Error(), filepath.Join(badJSON, "config.json")) {
				t.Fatalf("New: %q does not name the file", err)
			}
			if left := dirEntries(t, root); len(left) != 0 {
				t.Fatalf("left on disk: %v", left)
			}
		})
	}
}

func TestDuplicateID(t *testing.T) {
	root := t.TempDir()
	opts := runtime.ContainerOpts{Root: root, ID: "dup", Bundle: fixture.NewBundle(t).Path}
	c, err := runtime.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = runtime.New(opts)
	if want := "mkdir " + root + "/dup: file exists"; !errdefs.IsAlreadyExists(err) || err.Error() != want {
		t.Fatalf("second New: %v, want AlreadyExists %q", err, want)
	}
	if got, _ := runtime.ListIDs(root); len(got) != 1 || got[0] != "dup" {
		t.Fatalf("ListIDs = %v", got)
	}
	if c2, err := runtime.Load(root, "dup"); err != nil || c2.Incarnation() != c.Incarnation() {
		t.Fatalf("the first container was touched: %v", err)
	}
}

// TestMissingExecutable: runc's own message reaches the caller, and after
// Delete nothing is left: no state dir, no runc state, no process.
func TestMissingExecutable(t *testing.T) {
	e := newEnv(t)
	c, err := runtime.New(e.opts(fixture.UniqueID(t), fixture.NewBundle(t, fixture.RawArgs("/no/such/binary")).Path))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Create(context.Background(), runtime.CreateOpts{})
	var oci *runtime.OCIRuntimeError
	if !errors.As(err, &oci) || !errdefs.IsInternal(err) || !strings.HasPrefix(err.Error(), "oci runtime error: ") ||
		!strings.Contains(err.Error(), "/no/such/binary") {
		t.Fatalf("Create: %v, want an oci runtime error naming the binary", err)
	}
	t.Logf("Create: %v", err)
	if left := dirEntries(t, c.Dir()); len(left) != 1 || left[0] != "state.json" {
		t.Fatalf("container dir after a failed Create: %v, want only state.json", left)
	}
	if err := c.Delete(context.Background()); err != nil {
		t.Fatal(err)
	}
	if left := dirEntries(t, e.root); len(left) != 0 {
		t.Fatalf("state dir after Delete: %v", left)
	}
	if left := dirEntries(t, e.runcRoot); len(left) != 0 {
		t.Fatalf("runc state left: %v", left)
	}
}

// TestExecRejects: bad exec ids and ids in use.
func TestExecRejects(t *testing.T) {
	e := newEnv(t)
	c, _ := e.run(t, fixture.NewBundle(t, sleeper), runtime.Stdio{})
	ctx := context.Background()
	for _, pid := range []string{"", "..", "a/b", ".hidden"} {
		if _, err := c.Exec(ctx, pid, execSpec("exit", "0"), runtime.Stdio{}); !errdefs.IsInvalidArgument(err) {
			t.Errorf("Exec(%q): %v, want InvalidArgument", pid, err)
		}
	}
	want := "mkdir " + c.Dir() + "/init: file exists"
	if _, err := c.Exec(ctx, "init", execSpec("exit", "0"), runtime.Stdio{}); !errdefs.IsAlreadyExists(err) || err.Error() != want {
		t.Errorf("Exec(init): %v, want %q", err, want)
	}
	p, err := c.Exec(ctx, "e", execSpec("sleep", "1h"), runtime.Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	want = "mkdir " + c.Dir() + "/e: file exists"
	if _, err := c.Exec(ctx, "e", execSpec("exit", "0"), runtime.Stdio{}); !errdefs.IsAlreadyExists(err) || err.Error() != want {
		t.Errorf("Exec(e) twice: %v, want %q", err, want)
	}
	bad := execSpec("exit", "0")
	bad.Cwd = "relative"
	if _, err := c.Exec(ctx, "badcwd", bad, runtime.Stdio{}); !strings.HasPrefix(fmtErr(err), "oci runtime error: ") {
		t.Errorf("Exec with a relative cwd: %v, want an oci runtime error", err)
	}
	if _, err := os.Stat(filepath.Join(c.Dir(), "badcwd")); !os.IsNotExist(err) {
		t.Errorf("failed exec left its dir: %v", err)
	}
	p.Signal(9)
	wantStatus(t, p, 137)
}

func fmtErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
