package runtime_test

import (
	"testing"

	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/runtime"
)

// TestStartedMarkerFollowsRetire: the started marker (what restore uses to
// tell a running container from an interrupted create) is kept across
// Load and Retire.
func TestStartedMarkerFollowsRetire(t *testing.T) {
	root := t.TempDir()
	b := fixture.NewBundle(t)
	c, err := runtime.New(runtime.ContainerOpts{Root: root, ID: "m", Bundle: b.Path})
	if err != nil {
		t.Fatal(err)
	}
	if c.Started() {
		t.Fatal("a new container must not be marked started")
	}
	if err := c.MarkStarted(); err != nil {
		t.Fatal(err)
	}
	loaded, err := runtime.Load(root, "m")
	if err != nil {
		t.Fatal(err)
	}
	if !loaded.Started() {
		t.Fatal("the marker was not seen by Load")
	}
	if err := loaded.Retire(); err != nil {
		t.Fatal(err)
	}
	if !loaded.Started() {
		t.Fatal("the marker did not follow the retired dir")
	}
}
