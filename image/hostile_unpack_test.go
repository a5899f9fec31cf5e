package image_test

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/image"
	"github.com/evjournal/containerd/integration/fixture"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/zstd"
	"github.com/sirupsen/logrus"
)

// TestPullBombs: layers that decompress far beyond their size are refused
// as invalid while they unpack, naming the bound they crossed, and leave
// nothing: a gzip of 256 MiB of zeros (the ratio bound: 64 MiB here), an
// image over its size bound in one layer or in two (each under it), with a
// layer the store already has counted too, and a zstd frame asking for a 512 MiB window.
func TestPullBombs(t *testing.T) {
	fixture.RequireRoot(t)
	reg := fixture.NewHostileRegistry(t)
	five := fixture.TarLayer(t, fixture.File{Name: "five", Body: strings.Repeat("5", 5<<20)})
	reg.Image(t, "bombs", "ratio", fixture.HostileImage{Layers: []fixture.Layer{fixture.GzipBomb(t, 256<<20)}})
	reg.Image(t, "bombs", "one", fixture.HostileImage{Layers: []fixture.Layer{fixture.GzipBomb(t, 10<<20)}})
	// Layers whose diff ids are right: whichever unpacks first succeeds.
	other := fixture.TarLayer(t, fixture.File{Name: "other", Body: strings.Repeat("o", 5<<20)})
	reg.Image(t, "bombs", "two", fixture.HostileImage{Layers: []fixture.Layer{five, other}})
	reg.Image(t, "bombs", "five", fixture.HostileImage{Layers: []fixture.Layer{five}})
	reg.Image(t, "bombs", "present", fixture.HostileImage{Layers: []fixture.Layer{five, fixture.TarLayer(t, fixture.File{Name: "more", Body: strings.Repeat("m", 4<<20)})}})
	reg.Image(t, "bombs", "window", fixture.HostileImage{Layers: []fixture.Layer{fixture.ZstdWindow(512 << 20)}})

	s, root := newStore(t, image.Options{})
	_, err := s.Pull(ctx(t), reg.Host+"/bombs:ratio", nil)
	wantRefused(t, "gzip bomb", err, errdefs.IsInvalidArgument, "decompression ratio bound", "67108864")
	_, err = s.Pull(ctx(t), reg.Host+"/bombs:window", nil)
	wantRefused(t, "zstd window", err, errdefs.IsInvalidArgument, "window bound")
	wantEmptyStore(t, s, root)

	small, root := newStore(t, image.Options{Limits: image.Limits{MaxImageSize: 8 << 20}})
	for _, tag := range []string{"one", "two"} {
		_, err = small.Pull(ctx(t), reg.Host+"/bombs:"+tag, nil)
		wantRefused(t, tag, err, errdefs.IsInvalidArgument, "image size bound", "8388608")
	}
	wantEmptyStore(t, small, root)
	if _, err := small.Pull(ctx(t), reg.Host+"/bombs:five", nil); err != nil {
		t.Fatalf("an image under the bound: %v", err)
	}
	_, err = small.Pull(ctx(t), reg.Host+"/bombs:present", nil)
	wantRefused(t, "an image over the bound with a layer present", err, errdefs.IsInvalidArgument, "image size bound")
}

// tarOf is a plain (uncompressed) tar of entries, each header followed by
// its body if it has one: a layer whose diff id is its digest.
func tarOf(t *testing.T, entries ...*tar.Header) fixture.Layer {
	t.Helper()
	b := tarBytes(t, entries...)
	return fixture.RawLayer(b, fixture.Descriptor("", b).Digest)
}

func tarBytes(t *testing.T, entries ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestPullMalformedLayers: a layer that cannot be unpacked is invalid (the
// image's fault, not the node's), whether its tar or its compression is
// broken or it reaches out of the layer; nothing is written outside the
// layer and the store is left as it was.
func TestPullMalformedLayers(t *testing.T) {
	fixture.RequireRoot(t)
	reg := fixture.NewHostileRegistry(t)
	goodTar := tarBytes(t, &tar.Header{Name: "f", Typeflag: tar.TypeReg, Size: 1000})
	good := fixture.RawLayer(goodTar, fixture.Descriptor("", goodTar).Digest)
	dir := &tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755}
	for _, tc := range []struct {
		name  string
		layer fixture.Layer
	}{
		{"not-a-tar", fixture.RawLayer(bytes.Repeat([]byte("not a tar "), 200), good.DiffID)},
		{"truncated-tar", fixture.RawLayer(goodTar[:700], good.DiffID)},
		{"corrupt-gzip", fixture.RawLayer(append([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}, bytes.Repeat([]byte{0xee}, 100)...), good.DiffID)},
		{"hardlink-to-dir", tarOf(t, dir, &tar.Header{Name: "l", Typeflag: tar.TypeLink, Linkname: "d"})},
		{"link-to-nothing", tarOf(t, &tar.Header{Name: "l", Typeflag: tar.TypeLink, Linkname: "missing"})},
		{"path-traversal", tarOf(t, &tar.Header{Name: "../../../escaped", Typeflag: tar.TypeReg, Size: 1})},
		{"symlink-escape", tarOf(t, &tar.Header{Name: "out", Typeflag: tar.TypeSymlink, Linkname: "../../../.."},
			&tar.Header{Name: "out/escaped", Typeflag: tar.TypeReg, Size: 1})},
		{"hardlink-escape", tarOf(t, &tar.Header{Name: "l", Typeflag: tar.TypeLink, Linkname: "../../../../etc/hostname"})},
		{"whiteout-outside", tarOf(t, &tar.Header{Name: "../../../.wh.escaped", Typeflag: tar.TypeReg})},
	} {
		reg.Image(t, "bad", tc.name, fixture.HostileImage{Layers: []fixture.Layer{tc.layer}})
	}
	// The store is one level down a dir of the test's that must hold
	// nothing else at the end.
	parent := t.TempDir()
	s, err := image.Open(filepath.Join(parent, "store"), image.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"not-a-tar", "truncated-tar", "corrupt-gzip", "hardlink-to-dir", "link-to-nothing",
		"path-traversal", "symlink-escape", "hardlink-escape", "whiteout-outside"} {
		_, err := s.Pull(ctx(t), reg.Host+"/bad:"+name, nil)
		wantRefused(t, name, err, errdefs.IsInvalidArgument)
		t.Logf("%s: %v", name, err)
	}
	if e := entries(t, parent); len(e) != 1 {
		t.Errorf("the store's parent holds %v, want the store only", e)
	}
	wantEmptyStore(t, s, filepath.Join(parent, "store"))
}

// TestPullDiskFull: a full disk during a pull is a resource exhausted,
// whether the blob does not fit (download) or its files do not (unpack),
// and the pull leaves nothing; once space is back the pull works.
func TestPullDiskFull(t *testing.T) {
	reg := fixture.NewHostileRegistry(t)
	dir := fixture.SmallTmpfs(t, "4m")
	noise := make([]byte, 6<<20)
	for i := range noise {
		noise[i] = byte(i*7919 + i>>8)
	}
	reg.Image(t, "full", "blob", fixture.HostileImage{Layers: []fixture.Layer{fixture.RawLayer(noise, v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("d", 64)})}})
	reg.Image(t, "full", "files", fixture.HostileImage{Layers: []fixture.Layer{fixture.GzipBomb(t, 6<<20)}})
	reg.Image(t, "full", "fits", fixture.HostileImage{Layers: []fixture.Layer{fixture.TarLayer(t, fixture.File{Name: "f", Body: "fits"})}})
	s, err := image.Open(filepath.Join(dir, "store"), image.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"blob", "files"} {
		_, err := s.Pull(ctx(t), reg.Host+"/full:"+tag, nil)
		wantRefused(t, tag, err, errdefs.IsResourceExhausted, "no space left on device")
	}
	wantEmptyStore(t, s, filepath.Join(dir, "store"))
	if _, err := s.Pull(ctx(t), reg.Host+"/full:fits", nil); err != nil {
		t.Fatalf("a pull that fits after the full ones: %v", err)
	}
}

// TestLostLayerRecord: a layer whose record cannot be read at start is
// dropped, and the image that uses it is no longer there (kubelet then
// pulls it again, which brings both back); before, it was reported
// present and no container could be made of it.
func TestLostLayerRecord(t *testing.T) {
	fixture.RequireRoot(t)
	reg := newRegistry(t)
	reg.push(t, "test/app:1", fixture.ImageOf(t, testConfig, baseLayer(t), upperLayer(t)))
	s, root := newStore(t, image.Options{})
	ref := reg.host + "/test/app:1"
	img, err := s.Pull(ctx(t), ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	record := filepath.Join(root, "layers", strings.TrimPrefix(img.Layers[1], "sha256:"), "layer.json")
	if err := os.WriteFile(record, []byte("{torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	quiet := logrus.New()
	quiet.SetOutput(io.Discard)
	s2, err := image.Open(root, image.Options{Logger: logrus.NewEntry(quiet)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Get(ref); !errdefs.IsNotFound(err) {
		t.Fatalf("Get of the image that lost a layer: %v, want not found", err)
	}
	wantEmptyStore(t, s2, root)
	if _, err := s2.Pull(ctx(t), ref, nil); err != nil {
		t.Fatalf("the pull again: %v", err)
	}
	if _, err := s2.PrepareRootfs("c1", ref); err != nil {
		t.Fatalf("a rootfs of the image pulled again: %v", err)
	}
	if err := s2.RemoveRootfs("c1"); err != nil {
		t.Fatal(err)
	}
}

// TestPullBlobLies: a layer whose content is not what its config's diff id
// says is data loss; one cut short by the registry is unavailable (a
// retry may get it whole); one served zstd under a gzip media type is
// read for what it is.
func TestPullBlobLies(t *testing.T) {
	fixture.RequireRoot(t)
	reg := fixture.NewHostileRegistry(t)
	plain := tarBytes(t, &tar.Header{Name: "f", Typeflag: tar.TypeReg, Size: 100})
	wrong := fixture.RawLayer(plain, v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("e", 64)})
	reg.Image(t, "blobs", "diff-id", fixture.HostileImage{Layers: []fixture.Layer{wrong}})
	cut := fixture.TarLayer(t, fixture.File{Name: "cut", Body: strings.Repeat("c", 10000)})
	full := cut.Body
	reg.Image(t, "blobs", "cut", fixture.HostileImage{Layers: []fixture.Layer{cut}})
	reg.Put("blobs/blobs/"+cut.Desc.Digest.String(), fixture.Response{Length: cut.Desc.Size,
		Body: func() io.Reader { return io.LimitReader(full(), cut.Desc.Size/2) }})
	var z bytes.Buffer
	zw, _ := zstd.NewWriter(&z)
	zw.Write(plain)
	zw.Close()
	zl := fixture.RawLayer(z.Bytes(), fixture.Descriptor("", plain).Digest)
	zl.Desc.MediaType = types.OCILayer // gzip, it says
	reg.Image(t, "blobs", "zstd-as-gzip", fixture.HostileImage{Layers: []fixture.Layer{zl}})

	s, root := newStore(t, image.Options{})
	_, err := s.Pull(ctx(t), reg.Host+"/blobs:diff-id", nil)
	wantRefused(t, "a wrong diff id", err, errdefs.IsDataLoss, "the config's diff id is sha256:eee")
	_, err = s.Pull(ctx(t), reg.Host+"/blobs:cut", nil)
	wantRefused(t, "a blob cut short", err, errdefs.IsUnavailable, cut.Desc.Digest.String())
	wantEmptyStore(t, s, root)
	if _, err := s.Pull(ctx(t), reg.Host+"/blobs:zstd-as-gzip", nil); err != nil {
		t.Fatalf("a zstd layer labelled gzip: %v", err)
	}
}
