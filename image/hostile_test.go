package image_test

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/image"
	"github.com/evjournal/containerd/integration/fixture"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// These tests pull from a registry that lies (fixture.HostileRegistry).
// Those of this file need no root: each pull is refused before a layer is
// unpacked, and the images that pass have no layer.

// wantRefused fails unless err has the class is tells and names each of words.
func wantRefused(t *testing.T, what string, err error, is func(error) bool, words ...string) {
	t.Helper()
	if err == nil || !is(err) {
		t.Fatalf("%s: %v, want an error of another class", what, err)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("%s: %v, want it to name %q", what, err, w)
		}
	}
}

// allocatedBy is how many bytes the process allocated while f ran (the
// registry's side included: it serves from memory it already holds).
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// pullBudget is what a refused pull may allocate: a manifest or config read
// to its bound, and change.
const pullBudget = 3 * image.MaxManifestSize

// zeroLayers is an image of no layer: enough for the bounds on its way.
func zeroLayers(t *testing.T, reg *fixture.HostileRegistry, repo, tag string) v1.Descriptor {
	return reg.Image(t, repo, tag, fixture.HostileImage{})
}

// TestPullManifestBound: a manifest over 4 MiB is refused as invalid,
// naming the bound, whether its length is announced or not, and an index
// child declared over it is never asked for; the pull allocates a few MiB,
// not the 80 MB the registry offers.
func TestPullManifestBound(t *testing.T) {
	reg := fixture.NewHostileRegistry(t)
	s, root := newStore(t, image.Options{})
	const size = 80 << 20
	reg.Put("big/manifests/announced", fixture.Response{ContentType: string(types.OCIManifestSchema1), Body: fixture.EndlessManifest(size), Length: size})
	reg.Put("big/manifests/chunked", fixture.Response{ContentType: string(types.OCIManifestSchema1), Body: fixture.EndlessManifest(size)})
	child := v1.Descriptor{MediaType: types.OCIManifestSchema1, Size: size, Digest: v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("1", 64)},
		Platform: &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}}
	reg.Manifest(t, "big", "index", types.OCIImageIndex, v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{child}})
	for _, tag := range []string{"announced", "chunked", "index"} {
		var err error
		n := allocatedBy(func() { _, err = s.Pull(ctx(t), reg.Host+"/big:"+tag, nil) })
		wantRefused(t, tag, err, errdefs.IsInvalidArgument, "manifest size bound", "4194304")
		if n > pullBudget {
			t.Errorf("%s: the pull allocated %d bytes, want at most %d", tag, n, pullBudget)
		}
		t.Logf("%s: %v (%d bytes allocated)", tag, err, n)
	}
	if n := reg.Requests("big/manifests/" + child.Digest.String()); n != 0 {
		t.Errorf("the child declared over the bound was asked for %d times", n)
	}
	wantEmptyStore(t, s, root)
}

// TestPullConfigBound: a config declared over 4 MiB is refused before it
// is asked for; one declared small but served 900 MiB long is refused as
// data loss once past its declared size.
func TestPullConfigBound(t *testing.T) {
	reg := fixture.NewHostileRegistry(t)
	s, root := newStore(t, image.Options{})
	huge := v1.Descriptor{MediaType: types.OCIConfigJSON, Size: 900 << 20, Digest: v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("2", 64)}}
	reg.Put("cfg/blobs/"+huge.Digest.String(), fixture.Response{Body: fixture.EndlessManifest(huge.Size)})
	reg.Image(t, "cfg", "declared", fixture.HostileImage{Manifest: func(m *v1.Manifest) { m.Config = huge }})
	_, err := s.Pull(ctx(t), reg.Host+"/cfg:declared", nil)
	wantRefused(t, "config declared 900 MiB", err, errdefs.IsInvalidArgument, "config size bound", huge.Digest.String())
	if n := reg.Requests("cfg/blobs/" + huge.Digest.String()); n != 0 {
		t.Errorf("the config declared over the bound was asked for %d times", n)
	}

	liar := huge
	liar.Size, liar.Digest.Hex = 1000, strings.Repeat("3", 64)
	reg.Put("cfg/blobs/"+liar.Digest.String(), fixture.Response{Body: fixture.EndlessManifest(huge.Size)})
	reg.Image(t, "cfg", "liar", fixture.HostileImage{Manifest: func(m *v1.Manifest) { m.Config = liar }})
	n := allocatedBy(func() { _, err = s.Pull(ctx(t), reg.Host+"/cfg:liar", nil) })
	wantRefused(t, "config served 900 MiB long", err, errdefs.IsDataLoss, liar.Digest.String())
	if n > pullBudget {
		t.Errorf("the pull allocated %d bytes, want at most %d", n, pullBudget)
	}
	wantEmptyStore(t, s, root)
}

// TestPullIndexDepth: a chain of MaxIndexDepth indexes is followed to its
// image; one more is refused as invalid, naming the bound, and the
// manifests below the bound are never asked for.
func TestPullIndexDepth(t *testing.T) {
	reg := fixture.NewHostileRegistry(t)
	s, _ := newStore(t, image.Options{})
	reg.IndexChain(t, "deepest", "top", image.MaxIndexDepth)
	if _, err := s.Pull(ctx(t), reg.Host+"/deepest:top", nil); err != nil {
		t.Fatalf("a chain of %d indexes: %v", image.MaxIndexDepth, err)
	}
	chain := reg.IndexChain(t, "too-deep", "top", image.MaxIndexDepth+2)
	_, err := s.Pull(ctx(t), reg.Host+"/too-deep:top", nil)
	wantRefused(t, "a chain one index too deep", err, errdefs.IsInvalidArgument, "index depth bound", chain[image.MaxIndexDepth].Digest.String())
	for _, d := range chain[image.MaxIndexDepth+1:] {
		if n := reg.Requests("too-deep/manifests/" + d.Digest.String()); n != 0 {
			t.Errorf("manifest %s below the bound was asked for %d times", d.Digest, n)
		}
	}
}

// TestPullLayerCount: an image of more than MaxLayers layers (10,000 say)
// is refused as invalid before its config or any layer is asked for.
func TestPullLayerCount(t *testing.T) {
	reg := fixture.NewHostileRegistry(t)
	s, root := newStore(t, image.Options{})
	for _, n := range []int{image.MaxLayers + 1, 10000} {
		var layers []fixture.Layer
		for i := range n {
			layers = append(layers, fixture.RawLayer([]byte(fmt.Sprint(i)), v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%064x", i)}))
		}
		tag := fmt.Sprint(n)
		m := reg.Image(t, "many", tag, fixture.HostileImage{Layers: layers})
		_, err := s.Pull(ctx(t), reg.Host+"/many:"+tag, nil)
		wantRefused(t, tag+" layers", err, errdefs.IsInvalidArgument, "layer count bound", fmt.Sprint(image.MaxLayers), tag)
		if g := reg.Requests("many/blobs/" + layers[0].Desc.Digest.String()); g != 0 {
			t.Errorf("%s layers: the first layer was downloaded %d times (manifest %s)", tag, g, m.Digest)
		}
	}
	wantEmptyStore(t, s, root)
}

// TestPullDeclaredSizes: layers whose declared sizes add up over the image
// size bound are refused before any is downloaded; a negative size is
// invalid.
func TestPullDeclaredSizes(t *testing.T) {
	reg := fixture.NewHostileRegistry(t)
	s, root := newStore(t, image.Options{Limits: image.Limits{MaxImageSize: 1 << 20}})
	a := fixture.RawLayer(make([]byte, 600<<10), v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("a", 64)})
	b := fixture.RawLayer(make([]byte, 601<<10), v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("b", 64)})
	reg.Image(t, "sizes", "over", fixture.HostileImage{Layers: []fixture.Layer{a, b}})
	_, err := s.Pull(ctx(t), reg.Host+"/sizes:over", nil)
	wantRefused(t, "layers declared over the image size bound", err, errdefs.IsInvalidArgument, "image size bound", "1048576")
	if n := reg.Requests("sizes/blobs/"+a.Desc.Digest.String()) + reg.Requests("sizes/blobs/"+b.Desc.Digest.String()); n != 0 {
		t.Errorf("%d layer downloads, want none", n)
	}
	reg.Image(t, "sizes", "overflow", fixture.HostileImage{Layers: []fixture.Layer{a, b}, Manifest: func(m *v1.Manifest) {
		m.Layers[0].Size, m.Layers[1].Size = math.MaxInt64, math.MaxInt64
	}})
	_, err = s.Pull(ctx(t), reg.Host+"/sizes:overflow", nil)
	wantRefused(t, "layer sizes whose sum overflows", err, errdefs.IsInvalidArgument, "image size bound")
	reg.Image(t, "sizes", "negative", fixture.HostileImage{Layers: []fixture.Layer{a}, Manifest: func(m *v1.Manifest) { m.Layers[0].Size = -1 }})
	_, err = s.Pull(ctx(t), reg.Host+"/sizes:negative", nil)
	wantRefused(t, "a negative layer size", err, errdefs.IsInvalidArgument, "negative size")
	wantEmptyStore(t, s, root)
}

// TestPullContentLies: a registry that serves a manifest as an index (or
// the reverse), a schema 1 manifest, content under a digest it does not
// have, or an index that names itself as its child is refused with a
// classified error; a manifest served as plain bytes (a static registry)
// is read for what it says.
func TestPullContentLies(t *testing.T) {
	reg := fixture.NewHostileRegistry(t)
	s, _ := newStore(t, image.Options{})
	m := zeroLayers(t, reg, "lies", "honest")
	serveAs := func(tag string, ct types.MediaType, of v1.Descriptor) {
		r := reg.Response("lies/manifests/" + of.Digest.String())
		r.ContentType = string(ct)
		reg.Put("lies/manifests/"+tag, r)
	}
	serveAs("as-index", types.OCIImageIndex, m)
	serveAs("as-bytes", "application/octet-stream", m)
	child := m
	child.Platform = &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	idx := reg.Manifest(t, "lies", "index", types.OCIImageIndex, v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{child}})
	serveAs("index-as-manifest", types.OCIManifestSchema1, idx)
	reg.Put("lies/manifests/schema1", fixture.Response{ContentType: string(types.DockerManifestSchema1), Body: func() io.Reader {
		return strings.NewReader(`{"schemaVersion":1,"name":"lies","tag":"schema1","fsLayers":[]}`)
	}})
	// Asked for the index by its digest, the registry sends the image.
	serveAs(idx.Digest.String(), types.OCIImageIndex, m)
	// The index's child is served the index's own bytes: an index that
	// names itself, as far as the registry can make it.
	selfIdx := reg.Manifest(t, "lies", "self", types.OCIImageIndex, v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex,
		Manifests: []v1.Descriptor{child}, Annotations: map[string]string{"self": "yes"}})
	serveAs(child.Digest.String(), types.OCIImageIndex, selfIdx)

	for _, tc := range []struct {
		ref   string
		is    func(error) bool
		words []string
	}{
		{"lies:as-index", errdefs.IsInvalidArgument, []string{"served as " + string(types.OCIImageIndex)}},
		{"lies:index-as-manifest", errdefs.IsInvalidArgument, []string{"served as " + string(types.OCIManifestSchema1)}},
		{"lies:schema1", errdefs.IsInvalidArgument, []string{"schema version 1"}},
		{"lies@" + idx.Digest.String(), errdefs.IsDataLoss, []string{"the registry sent content of digest " + m.Digest.String()}},
		{"lies:self", errdefs.IsDataLoss, []string{child.Digest.String()}},
	} {
		_, err := s.Pull(ctx(t), reg.Host+"/"+tc.ref, nil)
		wantRefused(t, tc.ref, err, tc.is, tc.words...)
	}
	if _, err := s.Pull(ctx(t), reg.Host+"/lies:as-bytes", nil); err != nil {
		t.Errorf("a manifest served as plain bytes: %v", err)
	}
	if n := len(s.List()); n != 1 {
		t.Errorf("%d images after the lies, want the one served as bytes", n)
	}
}
