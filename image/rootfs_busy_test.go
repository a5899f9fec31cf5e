package image_test

import (
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/image"
	"github.com/evjournal/containerd/integration/fixture"
)

// holdRootfs starts a process that holds a descriptor of rootfs (as a
// child forked while the daemon had a file of the rootfs open holds it
// until its exec) and returns the function that lets it go and reaps it.
func holdRootfs(t *testing.T, rootfs string) (release func()) {
	t.Helper()
	dir, err := os.Open(rootfs)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("cat") // holds fd 3 until its stdin closes
	cmd.Stdin, cmd.ExtraFiles = r, []*os.File{dir}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	var once sync.Once
	release = func() {
		once.Do(func() {
			w.Close()
			cmd.Wait()
		})
	}
	t.Cleanup(release)
	return release
}

// TestRemoveRootfsOutlastsABriefHolder: a rootfs whose mount is held for
// a moment by another process (a failed create's cleanup racing a fork of
// the daemon) is still removed, with its mount, once the holder lets go;
// one held beyond the wait is refused as FailedPrecondition and left whole,
// and removed when asked again after the holder has gone.
func TestRemoveRootfsOutlastsABriefHolder(t *testing.T) {
	fixture.RequireRoot(t)
	reg := newRegistry(t)
	reg.push(t, "test/app:1", fixture.ImageOf(t, testConfig, baseLayer(t)))
	s, root := newStore(t, image.Options{})
	ref := reg.host + "/test/app:1"
	if _, err := s.Pull(ctx(t), ref, nil); err != nil {
		t.Fatalf("Pull: %v", err)
	}

	rootfs, err := s.PrepareRootfs("brief", ref)
	if err != nil {
		t.Fatalf("PrepareRootfs: %v", err)
	}
	release := holdRootfs(t, rootfs)
	timer := time.AfterFunc(300*time.Millisecond, release)
	defer timer.Stop()
	if err := s.RemoveRootfs("brief"); err != nil {
		t.Fatalf("RemoveRootfs with a holder that lets go after 300 ms: %v, want nil", err)
	}

	rootfs, err = s.PrepareRootfs("held", ref)
	if err != nil {
		t.Fatalf("PrepareRootfs: %v", err)
	}
	release = holdRootfs(t, rootfs)
	err = s.RemoveRootfs("held")
	if !errdefs.IsFailedPrecondition(err) {
		t.Fatalf("RemoveRootfs while held throughout: %v, want FailedPrecondition", err)
	}
	if m := fixture.MountsUnder(t, root); len(m) != 1 || len(s.ListRootfs()) != 1 {
		t.Fatalf("after a refused removal: mounts %v, rootfs %v; want the held one left whole", m, s.ListRootfs())
	}
	release()
	if err := s.RemoveRootfs("held"); err != nil {
		t.Fatalf("RemoveRootfs after the holder went: %v", err)
	}
	if m := fixture.MountsUnder(t, root); len(m) > 0 {
		t.Fatalf("mounts left: %v", m)
	}
	if err := s.Remove(ref); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	wantEmptyStore(t, s, root)
}
