package runtime_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/runtime"
)

// fakeShim writes a shell script standing in for the shim.
func fakeShim(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fake-shim")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestStartFailures: what a misbehaving or missing shim gives Create, with
// v0.2's texts, and that the failed start leaves no process dir or shim.
func TestStartFailures(t *testing.T) {
	bundle := fixture.NewBundle(t).Path
	for _, tc := range []struct {
		name    string
		shim    string
		timeout time.Duration // StartTimeout
		ctx     time.Duration // caller's deadline, 0 = none
		check   func(error) bool
		text    string
	}{
		{"not installed", "/no/such/shim", 0, 0, errdefs.IsInternal, "/no/such/shim not installed on system"},
		{"not on PATH", "no-such-shim-xyz", 0, 0, errdefs.IsInternal, "no-such-shim-xyz not installed on system"},
		{"exits silently", fakeShim(t, "exit 1"), 0, 0, errdefs.IsInternal, runtime.ErrShimExited.Error()},
		{"reports an error", fakeShim(t, `echo '{"error":"boom"}' >&3; exit 1`), 0, 0, isShimError, "shim error: boom"},
		{"never reports", fakeShim(t, "exec sleep 600"), 300 * time.Millisecond, 0, errdefs.IsDeadlineExceeded, runtime.ErrStartTimeout.Error()},
		{"caller gives up", fakeShim(t, "exec sleep 600"), time.Minute, 300 * time.Millisecond, isCtxDeadline, "context deadline exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			c, err := runtime.New(runtime.ContainerOpts{Root: root, ID: "c", Bundle: bundle, Shim: tc.shim,
				Runtime: fixture.Runc(t), RuntimeArgs: []string{"--root", t.TempDir()}, StartTimeout: tc.timeout})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if tc.ctx > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.ctx)
				defer cancel()
			}
			_, err = c.Create(ctx, runtime.CreateOpts{})
			if !tc.check(err) || err.Error() != tc.text {
				t.Fatalf("Create: %v, want %q", err, tc.text)
			}
			if left := dirEntries(t, c.Dir()); len(left) != 1 {
				t.Fatalf("container dir after the failure: %v, want only state.json", left)
			}
			if err := c.Delete(context.Background()); err != nil {
				t.Fatal(err)
			}
			if left := dirEntries(t, root); len(left) != 0 {
				t.Fatalf("left after Delete: %v", left)
			}
		})
	}
}

func isShimError(err error) bool {
	var se *runtime.ShimError
	return errors.As(err, &se) && errdefs.IsInternal(err)
}

func isCtxDeadline(err error) bool { return errors.Is(err, context.DeadlineExceeded) }
