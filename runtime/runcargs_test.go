package runtime_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/specs"
)

// fakeRunc records each command line (one arg a line, a blank line after)
// and prints what the daemon parses for state, ps and events.
const fakeRunc = `#!/bin/sh
printf '%s\n' "$@" >> "$0.log"; echo >> "$0.log"
for a in "$@"; do case "$a" in
  state) echo '{"id":"c","pid":1,"status":"paused","created":"2999-01-01T00:00:00Z"}'; exit 0;;
  ps) echo '[1,2]'; exit 0;;
  events) echo '{"type":"stats","id":"c","data":{"pids":{"current":2}}}'; exit 0;;
  fail) echo 'container "c" does not exist' >&2; exit 1;;
esac; done
`

// TestRuncCommandLines: every runc call the daemon makes puts the runtime
// args before the subcommand (v0.2 put them after it for checkpoint).
func TestRuncCommandLines(t *testing.T) {
	runc := filepath.Join(t.TempDir(), "runc")
	os.WriteFile(runc, []byte(fakeRunc), 0o700)
	c, err := runtime.New(runtime.ContainerOpts{Root: t.TempDir(), ID: "c", Bundle: fixture.NewBundle(t).Path,
		Runtime: runc, RuntimeArgs: []string{"--root", "/R"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	limit := int64(1 << 20)
	cp := t.TempDir()
	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"start", func() error { return c.Start(ctx) }, "--root /R start c"},
		{"pause", func() error { return c.Pause(ctx) }, "--root /R pause c"},
		{"resume", func() error { return c.Resume(ctx) }, "--root /R resume c"},
		{"state", func() error { _, err := c.Status(ctx); return err }, "--root /R state c"},
		{"ps", func() error { _, err := c.Pids(ctx); return err }, "--root /R ps --format json c"},
		{"update", func() error {
			return c.UpdateResources(ctx, &specs.LinuxResources{Memory: &specs.LinuxMemory{Limit: &limit}})
		}, "--root /R update --resources=- c"},
		{"events", func() error { _, err := c.Stats(ctx); return err }, "--root /R events --stats c"},
		{"checkpoint", func() error {
			return c.Checkpoint(ctx, cp, runtime.CheckpointOpts{Name: "n", TCP: true, UnixSockets: true, Shell: true, EmptyNS: []string{"network"}})
		}, "--root /R checkpoint --image-path " + cp + "/n --work-path " + cp + "/n/criu.work --tcp-established --ext-unix-sk --shell-job --empty-ns network --leave-running c"},
		{"checkpoint exit", func() error { return c.Checkpoint(ctx, cp, runtime.CheckpointOpts{Name: "e", Exit: true}) },
			"--root /R checkpoint --image-path " + cp + "/e --work-path " + cp + "/e/criu.work c"},
		{"delete", func() error { return c.Delete(ctx) }, "--root /R state c\n--root /R delete --force c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(runc + ".log")
			if err := tc.call(); err != nil {
				t.Fatal(err)
			}
			if got := commandLines(t, runc+".log"); got != tc.want {
				t.Fatalf("runc called as\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func commandLines(t *testing.T, log string) string {
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, cmd := range strings.Split(strings.TrimSuffix(string(data), "\n\n"), "\n\n") {
		cmds = append(cmds, strings.ReplaceAll(cmd, "\n", " "))
	}
	return strings.Join(cmds, "\n")
}

// TestRuncFailure: a failing runc gives a *RuncError with v0.2.9's text
// byte for byte, nothing prepended (clients prefix-match it): pause and
// resume `exit status 1: "<output>"`, update the raw output.
func TestRuncFailure(t *testing.T) {
	runc := filepath.Join(t.TempDir(), "runc")
	os.WriteFile(runc, []byte(fakeRunc), 0o700)
	c, err := runtime.New(runtime.ContainerOpts{Root: t.TempDir(), ID: "c", Bundle: fixture.NewBundle(t).Path,
		Runtime: runc, RuntimeArgs: []string{"fail"}})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Pause(context.Background())
	want := &runtime.RuncError{Op: "pause", Status: 1, Output: "container \"c\" does not exist\n"}
	var re *runtime.RuncError
	if !errors.As(err, &re) || !reflect.DeepEqual(re, want) || !errdefs.IsNotFound(err) {
		t.Fatalf("Pause: %#v, want %#v", err, want)
	}
	if got := err.Error(); got != `exit status 1: "container \"c\" does not exist\n"` {
		t.Fatalf("pause: text %q", got)
	}
	if err := c.Resume(context.Background()); err == nil || err.Error() != `exit status 1: "container \"c\" does not exist\n"` {
		t.Fatalf("resume: %v", err)
	}
	limit := int64(1 << 20)
	err = c.UpdateResources(context.Background(), &specs.LinuxResources{Memory: &specs.LinuxMemory{Limit: &limit}})
	if !errors.As(err, &re) || !errdefs.IsNotFound(err) || err.Error() != "container \"c\" does not exist\n" {
		t.Fatalf("update: %#v (%q), want runc's raw output", err, err)
	}
}
