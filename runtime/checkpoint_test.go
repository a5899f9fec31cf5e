package runtime_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/runtime"
)

// newIdle is a container record without any process (no runc, no root).
func newIdle(t *testing.T) *runtime.Container {
	t.Helper()
	c, err := runtime.New(runtime.ContainerOpts{Root: t.TempDir(), ID: "idle", Bundle: fixture.NewBundle(t).Path})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCheckpointListing(t *testing.T) {
	c := newIdle(t)
	dir := filepath.Join(c.Bundle(), "checkpoints")
	_, err := c.Checkpoints("")
	if want := "open " + dir + ": no such file or directory"; !errdefs.IsNotFound(err) || err.Error() != want {
		t.Fatalf("Checkpoints of a missing dir: %v, want NotFound %q", err, want)
	}
	writeCheckpoint(t, dir, "b", `{"name":"b","tcp":true,"shell":true,"emptyNS":["network"]}`)
	writeCheckpoint(t, dir, "a", `{"name":"a","unixSockets":true,"exit":true}`)
	os.WriteFile(filepath.Join(dir, "plain-file"), nil, 0o600)
	got, err := c.Checkpoints("")
	if err != nil {
		t.Fatal(err)
	}
	want := []runtime.Checkpoint{
		{Name: "a", CheckpointOpts: runtime.CheckpointOpts{Name: "a", UnixSockets: true, Exit: true}},
		{Name: "b", CheckpointOpts: runtime.CheckpointOpts{Name: "b", TCP: true, Shell: true, EmptyNS: []string{"network"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Checkpoints = %+v, want %+v", got, want)
	}
	os.Mkdir(filepath.Join(dir, "broken"), 0o700)
	if _, err := c.Checkpoints(""); err == nil {
		t.Fatal("a checkpoint without config.json was accepted")
	}
}

func writeCheckpoint(t *testing.T, dir, name, config string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, name), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name, "config.json"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestDeleteCheckpoint(t *testing.T) {
	c := newIdle(t)
	dir := t.TempDir()
	writeCheckpoint(t, dir, "cp", `{"name":"cp"}`)
	for _, name := range []string{"", "..", ".", "../cp", "a/b"} {
		if err := c.DeleteCheckpoint(dir, name); !errdefs.IsInvalidArgument(err) {
			t.Errorf("DeleteCheckpoint(%q): %v, want InvalidArgument", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(c.Bundle(), "config.json")); err != nil {
		t.Fatalf("the bundle was touched: %v", err)
	}
	// A dir the daemon did not write (no marker, a marker of another
	// name, a symlink to a real checkpoint) is refused and left alone.
	writeCheckpoint(t, dir, "host-dir", `{"name":"host-dir"}`)
	writeMarker(t, dir, "other", "cp")
	os.Symlink(filepath.Join(dir, "cp"), filepath.Join(dir, "link"))
	for _, name := range []string{"host-dir", "other", "link"} {
		if err := c.DeleteCheckpoint(dir, name); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "not a checkpoint this daemon wrote") {
			t.Errorf("DeleteCheckpoint(%q): %v, want FailedPrecondition", name, err)
		}
		if _, err := os.Lstat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s was removed", name)
		}
	}
	for _, name := range []string{"host-dir", "other", "link"} {
		os.RemoveAll(filepath.Join(dir, name))
	}
	writeMarker(t, dir, "cp", "cp")
	if err := c.DeleteCheckpoint(dir, "cp"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteCheckpoint(dir, "cp"); err != nil {
		t.Fatalf("deleting a missing checkpoint: %v, want success", err)
	}
	if left := dirEntries(t, dir); len(left) != 0 {
		t.Fatalf("left: %v", left)
	}
}

// writeMarker makes dir/name a checkpoint that the daemon wrote for the
// checkpoint named forName.
func writeMarker(t *testing.T, dir, name, forName string) {
	t.Helper()
	writeCheckpoint(t, dir, name, `{"name":"`+name+`"}`)
	marker := `{"checkpoint":"` + forName + `","writtenBy":"containerd"}`
	if err := os.WriteFile(filepath.Join(dir, name, "containerd-checkpoint.json"), []byte(marker), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestFailedCheckpointCleansUp: a checkpoint that fails (no runc state for
// this container) removes the checkpoint dir and every dir it made on the
// way, and nothing that was there before.
func TestFailedCheckpointCleansUp(t *testing.T) {
	e := newEnv(t)
	c := e.newContainer(t, fixture.NewBundle(t, sleeper))
	base := t.TempDir()
	os.WriteFile(filepath.Join(base, "keep"), nil, 0o600)
	err := c.Checkpoint(context.Background(), filepath.Join(base, "new", "deep"), runtime.CheckpointOpts{Name: "cp"})
	if err == nil {
		t.Fatal("Checkpoint of a container runc does not know succeeded")
	}
	if left := dirEntries(t, base); !reflect.DeepEqual(left, []string{"keep"}) {
		t.Fatalf("after the failed checkpoint %s holds %v, want only keep", base, left)
	}
}

func TestCheckpointNameInUse(t *testing.T) {
	c := newIdle(t)
	dir := t.TempDir()
	writeCheckpoint(t, dir, "cp", `{"name":"cp"}`)
	err := c.Checkpoint(context.Background(), dir, runtime.CheckpointOpts{Name: "cp"})
	if want := "mkdir " + dir + "/cp: file exists"; !errdefs.IsAlreadyExists(err) || err.Error() != want {
		t.Fatalf("Checkpoint to a name in use: %v, want %q", err, want)
	}
	if err := c.Checkpoint(context.Background(), dir, runtime.CheckpointOpts{Name: "../x"}); !errdefs.IsInvalidArgument(err) {
		t.Fatalf("Checkpoint named ../x: %v", err)
	}
}

// TestCheckpointRestore needs CRIU: checkpoint a running container (leaving
// it running), checkpoint it again with exit, then restore a new container.
func TestCheckpointRestore(t *testing.T) {
	fixture.RequireCRIU(t)
	e := newEnv(t)
	b := fixture.NewBundle(t, sleeper)
	c, p := e.run(t, b, runtime.Stdio{})
	ctx := context.Background()
	dir := t.TempDir()
	if err := c.Checkpoint(ctx, dir, runtime.CheckpointOpts{Name: "live"}); err != nil {
		t.Fatalf("Checkpoint (leave running): %v", err)
	}
	if got := status(t, c); got != "running" {
		t.Fatalf("status after a leave-running checkpoint = %q", got)
	}
	if err := c.Checkpoint(ctx, dir, runtime.CheckpointOpts{Name: "final", Exit: true}); err != nil {
		t.Fatalf("Checkpoint (exit): %v", err)
	}
	waitExit(t, p)
	if err := c.Retire(); err != nil {
		t.Fatal(err)
	}
	r, err := runtime.New(e.opts(c.ID(), b.Path))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteContainer(t, r) })
	rp, err := r.Create(ctx, runtime.CreateOpts{Checkpoint: filepath.Join(dir, "final")})
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if got := status(t, r); got != "running" {
		t.Fatalf("restored container status = %q", got)
	}
	rp.Signal(syscall.SIGKILL)
	wantStatus(t, rp, 137)
}
