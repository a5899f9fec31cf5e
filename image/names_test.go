package image_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/image"
	"github.com/evjournal/containerd/integration/fixture"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// TestGet: every form of a name finds the image; a tag pulled again for
// another image moves to it, and the old image stays, reachable by ID.
func TestGet(t *testing.T) {
	fixture.RequireRoot(t)
	reg := newRegistry(t)
	reg.push(t, "library/busybox:1.29", fixture.ImageOf(t, testConfig, fixture.LayerOf(t, fixture.File{Name: "one", Body: "1"})))
	s, _ := newStore(t, image.Options{Mirrors: map[string][]string{"docker.io": {"http://" + reg.host}}})
	img, err := s.Pull(ctx(t), "busybox:1.29", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(img.RepoTags, []string{"docker.io/library/busybox:1.29"}) {
		t.Fatalf("RepoTags = %v", img.RepoTags)
	}
	hex := strings.TrimPrefix(img.ID, "sha256:")
	for _, name := range []string{
		"busybox:1.29", "docker.io/library/busybox:1.29", "library/busybox:1.29", "index.docker.io/library/busybox:1.29",
		img.RepoDigests[0], "busybox@" + strings.TrimPrefix(img.RepoDigests[0], "docker.io/library/busybox@"),
		img.ID, hex, hex[:12], "sha256:" + hex[:12],
	} {
		if got, err := s.Get(name); err != nil || got.ID != img.ID {
			t.Errorf("Get(%q) = %s, %v; want %s", name, got.ID, err, img.ID)
		}
	}
	for _, name := range []string{"busybox", "busybox:1.30", "sha256:" + strings.Repeat("0", 64), "ffffffff"} {
		if _, err := s.Get(name); !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), name) {
			t.Errorf("Get(%q): %v, want not found naming it", name, err)
		}
	}

	reg.push(t, "library/busybox:1.29", fixture.ImageOf(t, testConfig, fixture.LayerOf(t, fixture.File{Name: "two", Body: "2"})))
	img2, err := s.Pull(ctx(t), "busybox:1.29", nil)
	if err != nil {
		t.Fatal(err)
	}
	old, err := s.Get(img.ID)
	if err != nil || len(old.RepoTags) != 0 || len(old.RepoDigests) != 1 {
		t.Fatalf("the old image after its tag moved: %+v, %v", old, err)
	}
	if got, _ := s.Get("busybox:1.29"); got.ID != img2.ID {
		t.Errorf("busybox:1.29 names %s, want the new %s", got.ID, img2.ID)
	}
	if n := len(s.List()); n != 2 {
		t.Errorf("List has %d images, want 2", n)
	}
}

// TestBadInput: bad names and unknown images are refused with a classified
// error naming what was asked, and leave the store empty.
func TestBadInput(t *testing.T) {
	fixture.RequireRoot(t)
	reg := newRegistry(t)
	s, root := newStore(t, image.Options{})
	for _, tc := range []struct {
		ref  string
		want func(error) bool
	}{
		{"", errdefs.IsInvalidArgument},
		{"Upper/Case:1", errdefs.IsInvalidArgument},
		{"a:b:c", errdefs.IsInvalidArgument},
		{"http://" + reg.host + "/x:1", errdefs.IsInvalidArgument},
		{reg.host + "/no/such:1", errdefs.IsNotFound},
	} {
		_, err := s.Pull(ctx(t), tc.ref, nil)
		if err == nil || !tc.want(err) || (tc.ref != "" && !strings.Contains(err.Error(), tc.ref)) {
			t.Errorf("Pull(%q): %v", tc.ref, err)
		}
	}
	if err := s.Remove("nothing:1"); !errdefs.IsNotFound(err) {
		t.Errorf("Remove of an unknown image: %v, want not found", err)
	}
	if _, err := s.PrepareRootfs("c1", "nothing:1"); !errdefs.IsNotFound(err) {
		t.Errorf("PrepareRootfs of an unknown image: %v, want not found", err)
	}
	for _, id := range []string{"", "../x", ".hidden", "-flag", "a/b", strings.Repeat("a", 77)} {
		if _, err := s.PrepareRootfs(id, "x"); !errdefs.IsInvalidArgument(err) {
			t.Errorf("PrepareRootfs(%q): %v, want invalid argument", id, err)
		}
		if err := s.RemoveRootfs(id); !errdefs.IsInvalidArgument(err) {
			t.Errorf("RemoveRootfs(%q): %v, want invalid argument", id, err)
		}
	}
	if err := s.RemoveRootfs("never-made"); err != nil {
		t.Errorf("RemoveRootfs of an unknown rootfs: %v, want nil", err)
	}
	if _, err := s.MountRootfs("never-made"); !errdefs.IsNotFound(err) {
		t.Errorf("MountRootfs of an unknown rootfs: %v, want not found", err)
	}
	wantEmptyStore(t, s, root)
}

// TestPrepareRootfsTwice: one rootfs per container id.
func TestPrepareRootfsTwice(t *testing.T) {
	fixture.RequireRoot(t)
	reg := newRegistry(t)
	reg.push(t, "test/app:1", fixture.ImageOf(t, testConfig, fixture.LayerOf(t, fixture.File{Name: "f", Body: "f"})))
	s, _ := newStore(t, image.Options{})
	ref := reg.host + "/test/app:1"
	if _, err := s.Pull(ctx(t), ref, nil); err != nil {
		t.Fatal(err)
	}
	p, err := s.PrepareRootfs("c1", ref)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PrepareRootfs("c1", ref); !errdefs.IsAlreadyExists(err) {
		t.Errorf("second PrepareRootfs: %v, want already exists", err)
	}
	// The container's writes land in its upper dir, not in the layer.
	if err := os.WriteFile(filepath.Join(p, "f"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	p2, err := s.PrepareRootfs("c2", ref)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(p2, "f")); err != nil || string(b) != "f" {
		t.Errorf("c2 sees %q, %v; want the image's f", b, err)
	}
}

// TestWrongPlatform: an image built for another architecture is refused.
func TestWrongPlatform(t *testing.T) {
	fixture.RequireRoot(t)
	reg := newRegistry(t)
	img := fixture.ImageOf(t, testConfig, fixture.LayerOf(t, fixture.File{Name: "f", Body: "f"}))
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.Architecture = "not-this-one"
	img = withConfigFile(t, img, cf)
	reg.push(t, "test/app:1", img)
	s, root := newStore(t, image.Options{})
	_, err := s.Pull(ctx(t), reg.host+"/test/app:1", nil)
	if !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), "not-this-one") {
		t.Errorf("pull of a foreign image: %v", err)
	}
	wantEmptyStore(t, s, root)
}

func withConfigFile(t *testing.T, img v1.Image, cf *v1.ConfigFile) v1.Image {
	t.Helper()
	img, err := mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestFsInfo: the usage grows with a pull and names the mountpoint.
func TestFsInfo(t *testing.T) {
	fixture.RequireRoot(t)
	reg := newRegistry(t)
	reg.push(t, "test/app:1", fixture.ImageOf(t, testConfig, baseLayer(t)))
	s, _ := newStore(t, image.Options{})
	before, err := s.FsInfo()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pull(ctx(t), reg.host+"/test/app:1", nil); err != nil {
		t.Fatal(err)
	}
	after, err := s.FsInfo()
	if err != nil {
		t.Fatal(err)
	}
	if after.UsedBytes <= before.UsedBytes || after.InodesUsed < before.InodesUsed+5 || after.Mountpoint == "" || after.CapacityBytes == 0 {
		t.Errorf("FsInfo before %+v, after %+v", before, after)
	}
}
