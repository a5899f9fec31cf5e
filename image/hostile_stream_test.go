package image_test

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/image"
	"github.com/evjournal/containerd/integration/fixture"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// TestPullProgressTimeout: a registry that sends nothing (not even the
// headers of the manifest) or stops in the middle of the config or of a
// layer fails the pull once the progress timeout passes without a byte, as
// unavailable, naming the request and the timeout; a body that keeps
// coming, slower than the timeout in total, is no stall. No root: the
// layer fails before it is unpacked.
func TestPullProgressTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	reg := fixture.NewHostileRegistry(t)
	s, root := newStore(t, image.Options{Limits: image.Limits{ProgressTimeout: timeout}})
	reg.Put("slow/manifests/hangs", fixture.Response{Hang: true})
	var cfg v1.Descriptor
	reg.Image(t, "slow", "config-stalls", fixture.HostileImage{Manifest: func(m *v1.Manifest) { cfg = m.Config }})
	reg.Put("slow/blobs/"+cfg.Digest.String(), fixture.Response{Body: func() io.Reader { return strings.NewReader("{") }, Length: cfg.Size, Stall: true})
	layer := fixture.RawLayer(make([]byte, 100<<10), v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("c", 64)})
	reg.Image(t, "slow", "layer-stalls", fixture.HostileImage{Layers: []fixture.Layer{layer}})
	full := layer.Body
	reg.Put("slow/blobs/"+layer.Desc.Digest.String(), fixture.Response{Body: func() io.Reader { return io.LimitReader(full(), 50<<10) },
		Length: layer.Desc.Size, Stall: true})
	for _, tc := range []struct{ tag, request string }{
		{"hangs", "GET manifests/hangs"},
		{"config-stalls", "GET blobs/" + cfg.Digest.String()},
		{"layer-stalls", "GET blobs/" + layer.Desc.Digest.String()},
	} {
		start := time.Now()
		_, err := s.Pull(ctx(t), reg.Host+"/slow:"+tc.tag, nil)
		wantRefused(t, tc.tag, err, errdefs.IsUnavailable, tc.request, "no byte from the registry for 300ms (the pull progress timeout)")
		if d := time.Since(start); d > pullLimit/2 {
			t.Errorf("%s: failed after %s", tc.tag, d)
		}
	}
	wantEmptyStore(t, s, root)

	trickle := zeroLayers(t, reg, "trickle", "")
	body := reg.Response("trickle/manifests/" + trickle.Digest.String()).Body
	reg.Put("trickle/manifests/1", fixture.Response{ContentType: string(types.OCIManifestSchema1), Body: func() io.Reader {
		return &slowReader{r: body(), every: timeout / 3, chunk: int(trickle.Size/6) + 1}
	}})
	start := time.Now()
	if _, err := s.Pull(ctx(t), reg.Host+"/trickle:1", nil); err != nil {
		t.Fatalf("a manifest that keeps coming: %v", err)
	}
	if d := time.Since(start); d < timeout {
		t.Fatalf("the trickle took %s, not longer than the timeout: the test proves nothing", d)
	}
}

// slowReader is a body a registry sends in chunks, one every so often
// (the pace of a slow link, not a synchronization of the test).
type slowReader struct {
	r     io.Reader
	every time.Duration
	chunk int
}

func (s *slowReader) Read(p []byte) (int, error) {
	time.Sleep(s.every)
	return s.r.Read(p[:min(len(p), s.chunk)])
}

// TestPullParallelDownloads: a pull downloads MaxConcurrentDownloads layers
// at once, no more: the registry holds every layer until two are asked
// for at the same time, which a pull downloading one after the other
// never does.
func TestPullParallelDownloads(t *testing.T) {
	fixture.RequireRoot(t)
	reg := fixture.NewHostileRegistry(t)
	s, _ := newStore(t, image.Options{Limits: image.Limits{MaxConcurrentDownloads: 2}})
	var layers []fixture.Layer
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		layers = append(layers, fixture.TarLayer(t, fixture.File{Name: name, Body: name}))
	}
	reg.Image(t, "par", "1", fixture.HostileImage{Layers: layers})
	gate := make(chan struct{})
	for _, l := range layers {
		reg.Gate("par/blobs/"+l.Desc.Digest.String(), gate)
	}
	go func() {
		arrived := 0
		for arrived < 2 {
			select {
			case <-reg.Arrived("par/blobs/" + layers[arrived].Desc.Digest.String()):
				arrived++
			case <-time.After(pullLimit):
				return
			}
		}
		close(gate)
	}()
	if _, err := s.Pull(ctx(t), reg.Host+"/par:1", nil); err != nil {
		t.Fatalf("pull (the layers are held until two are asked for at once): %v", err)
	}
	if n := reg.MaxBlobsInFlight(); n != 2 {
		t.Errorf("at most %d blobs downloaded at once, want 2", n)
	}
}

// TestPullCancelStopsUnpack: a zstd layer whose stream of zeros would go on
// for 250 GB (the ratio and size bounds are set out of its way) is being
// unpacked when the pull is cancelled: the pull returns within a second,
// cancelled, and its unpack dir is gone. No root: the tar ends at once,
// the rest is the stream the diff id is computed over.
func TestPullCancelStopsUnpack(t *testing.T) {
	reg := fixture.NewHostileRegistry(t)
	s, root := newStore(t, image.Options{Limits: image.Limits{MaxDecompressionRatio: 1 << 40, MaxImageSize: 1 << 60}})
	reg.Image(t, "bomb", "zstd", fixture.HostileImage{Layers: []fixture.Layer{fixture.ZstdZeros(t, 1000)}})
	tmp := filepath.Join(root, "tmp")
	w := fixture.WatchDir(t, tmp)
	pullCtx, cancel := context.WithCancel(ctx(t))
	done := make(chan error, 1)
	go func() {
		_, err := s.Pull(pullCtx, reg.Host+"/bomb:zstd", nil)
		done <- err
	}()
	unpackDir := awaitUnpack(t, w, tmp)
	cancel()
	cancelled := time.Now()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("pull: %v, want cancelled", err)
		}
	case <-time.After(time.Second):
		t.Fatal("the pull is still unpacking a second after its cancel")
	}
	t.Logf("the pull returned %s after its cancel", time.Since(cancelled))
	if e := entries(t, tmp); len(e) > 0 {
		t.Errorf("tmp/ holds %v after the pull (%s), want nothing", e, unpackDir)
	}
}

// awaitUnpack waits for a layer's unpack dir under tmp to get its fs dir,
// made once the blob is downloaded and verified, just before the unpack.
func awaitUnpack(t *testing.T, w *fixture.DirWatch, tmp string) string {
	t.Helper()
	ev := w.Wait(t, pullLimit, "an unpack dir", func(e fixture.DirEvent) bool { return e.Created && strings.HasPrefix(e.Name, "unpack-") })
	dir := filepath.Join(tmp, ev.Name)
	w.Add(t, dir)
	if len(entries(t, dir)) < 2 { // blob, then fs
		w.Wait(t, pullLimit, "the layer's fs dir", func(e fixture.DirEvent) bool { return e.Dir == dir && e.Name == "fs" })
	}
	return dir
}
