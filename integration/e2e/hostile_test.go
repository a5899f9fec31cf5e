package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/integration/fixture"
)

// TestStdioNewFileAndReadOnlyStdin: an output path that does not exist yet
// is created 0600 and gets the output of both stdout and stderr; a regular
// file as stdin is read, never written.
func TestStdioNewFileAndReadOnlyStdin(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := fixture.UniqueID(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "input")
	os.WriteFile(in, []byte("from a host file\n"), 0o644)
	out := filepath.Join(dir, "out.log")
	evs := d.SubscribeAfter(time.Now(), id)
	b := fixture.NewBundle(t, fixture.Args("cat", "--", "stderr", "to stderr", "--", "exit", "3"))
	createReq(t, d, &types.CreateContainerRequest{Id: id, BundlePath: b.Path, Stdin: in, Stdout: out, Stderr: out})
	evs.Expect("start-container "+id, "exit "+id+" init 3")

	st, err := os.Lstat(out)
	if err != nil || st.Mode() != 0o600 {
		t.Fatalf("output file: %v, mode %v; want a new 0600 file", err, st.Mode())
	}
	// Two copies write the one file: each line whole, in either order.
	if data, _ := os.ReadFile(out); string(data) != "from a host file\nto stderr\n" && string(data) != "to stderr\nfrom a host file\n" {
		t.Errorf("output %q", data)
	}
	if data, _ := os.ReadFile(in); string(data) != "from a host file\n" {
		t.Errorf("stdin file now %q", data)
	}
}
