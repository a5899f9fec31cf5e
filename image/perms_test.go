package image_test

import (
	"archive/tar"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/evjournal/containerd/image"
	"github.com/evjournal/containerd/integration/fixture"
	"github.com/moby/sys/mountinfo"
)

// TestRootfsNothingUsableFromHost: the store's dirs on the way to a rootfs
// let others search but not list them (0711, also when an older daemon
// left them wider), the others stay root's alone, and an image's device
// node cannot be opened through a rootfs, not even by root: the overlay
// is nodev. It is not nosuid: set-uid programs inside containers keep
// working (the dir modes keep other host users out).
func TestRootfsNothingUsableFromHost(t *testing.T) {
	fixture.RequireRoot(t)
	reg := newRegistry(t)
	img := fixture.ImageOf(t, testConfig, baseLayer(t), fixture.EntriesLayer(t,
		fixture.Entry{Name: "null", Type: tar.TypeChar, Mode: 0o666, Major: 1, Minor: 3},
		fixture.Entry{Name: "su", Body: "#!/bin/true\n", Mode: 0o4755},
	))
	ref := reg.push(t, "test/devices:1", img).String()
	_, root := newStore(t, image.Options{})
	for _, d := range []string{root, filepath.Join(root, "containers")} {
		os.Chmod(d, 0o755) // as an older daemon could leave them
	}
	s, err := image.Open(root, image.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for d, want := range map[string]os.FileMode{root: 0o711, "containers": 0o711, "layers": 0o700, "images": 0o700, "tmp": 0o700} {
		if d != root {
			d = filepath.Join(root, d)
		}
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want mode %v", d, fi.Mode(), err, want)
		}
	}
	if _, err := s.Pull(ctx(t), ref, nil); err != nil {
		t.Fatal(err)
	}
	rootfs, err := s.PrepareRootfs("c1", ref)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.RemoveRootfs("c1") })
	if fi, err := os.Stat(filepath.Dir(rootfs)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the container's dir: %v %v, want 0700", fi.Mode(), err)
	}
	f, err := os.OpenFile(filepath.Join(rootfs, "null"), os.O_RDWR, 0)
	if err == nil {
		f.Close()
		t.Fatal("the image's device node opens through the rootfs")
	}
	if !errors.Is(err, syscall.EACCES) {
		t.Fatalf("open the image's device node: %v, want permission denied (nodev)", err)
	}
	opts := rootfsMountOptions(t, rootfs)
	if !strings.Contains(","+opts+",", ",nodev,") || strings.Contains(","+opts+",", ",nosuid,") {
		t.Fatalf("rootfs mounted %q, want nodev and not nosuid", opts)
	}
	if fi, err := os.Stat(filepath.Join(rootfs, "su")); err != nil || fi.Mode()&os.ModeSetuid == 0 {
		t.Fatalf("the image's set-uid file: %v %v, want it kept set-uid for the container", fi.Mode(), err)
	}
}

// rootfsMountOptions are the per-mount options of the mount at path.
func rootfsMountOptions(t *testing.T, path string) string {
	t.Helper()
	ms, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(path))
	if err != nil || len(ms) != 1 {
		t.Fatalf("mount at %s: %v %v", path, ms, err)
	}
	return ms[0].Options
}
