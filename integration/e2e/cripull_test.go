package e2e

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evjournal/containerd/integration/fixture"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func pullImage(t *testing.T, ctx context.Context, e *criEnv, ref string) error {
	t.Helper()
	_, err := e.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	return err
}

// TestCRIPullStallsAndParallel: with --image-pull-progress-timeout 1s, a
// registry that sends no header, or stops in the middle of a layer, fails
// the pull with Unavailable naming the request and the timeout, and leaves
// nothing (before, such a pull hung as long as the connection lived); with
// --max-concurrent-downloads 2 a pull downloads two layers at once (the
// registry holds them until two are asked for together), never three.
func TestCRIPullStallsAndParallel(t *testing.T) {
	t.Parallel()
	e := newCRIEnv(t, func(*criEnv) []string {
		return []string{"--image-pull-progress-timeout", "1s", "--max-concurrent-downloads", "2"}
	})
	reg := fixture.NewHostileRegistry(t)
	reg.Put("s/manifests/hangs", fixture.Response{Hang: true})
	stalls := fixture.TarLayer(t, fixture.File{Name: "f", Body: strings.Repeat("s", 100<<10)})
	reg.Image(t, "s", "layer-stalls", fixture.HostileImage{Layers: []fixture.Layer{stalls}})
	full := stalls.Body
	reg.Put("s/blobs/"+stalls.Desc.Digest.String(), fixture.Response{Length: stalls.Desc.Size, Stall: true,
		Body: func() io.Reader { return io.LimitReader(full(), stalls.Desc.Size/2) }})
	for _, p := range []hostilePull{
		{"s:hangs", codes.Unavailable, []string{"GET manifests/hangs: no byte from the registry for 1s (the pull progress timeout)"}},
		{"s:layer-stalls", codes.Unavailable, []string{"GET blobs/" + stalls.Desc.Digest.String() + ": no byte"}},
	} {
		wantPullRefused(t, p, pullImage(t, cctx(t), e, reg.Host+"/"+p.ref))
	}
	if left, _ := os.ReadDir(filepath.Join(e.d.Dir, "root", "images", "tmp")); len(left) > 0 {
		t.Errorf("images/tmp holds %d entries after the stalled pulls", len(left))
	}

	var layers []fixture.Layer
	gate := make(chan struct{})
	for _, name := range []string{"a", "b", "c", "d"} {
		l := fixture.TarLayer(t, fixture.File{Name: name, Body: name})
		reg.Gate("s/blobs/"+l.Desc.Digest.String(), gate)
		layers = append(layers, l)
	}
	reg.Image(t, "s", "four", fixture.HostileImage{Layers: layers})
	go func() {
		<-reg.Arrived("s/blobs/" + layers[0].Desc.Digest.String())
		<-reg.Arrived("s/blobs/" + layers[1].Desc.Digest.String())
		close(gate)
	}()
	if err := pullImage(t, cctx(t), e, reg.Host+"/s:four"); err != nil {
		t.Fatalf("pull of four layers held until two are asked for at once: %v", err)
	}
	if n := reg.MaxBlobsInFlight(); n != 2 {
		t.Errorf("at most %d layers downloaded at once, want 2", n)
	}
}

// TestCRIPullCancel: a layer whose stream of zeros would decompress for
// hours (250 GB of zstd frames; the ratio and size bounds are set out of
// its way) is being unpacked when kubelet's pull is cancelled: the daemon
// stops unpacking within a second (its temp dir is gone), where it used to
// go on at full CPU until the stream ended.
func TestCRIPullCancel(t *testing.T) {
	t.Parallel()
	e := newCRIEnv(t, func(*criEnv) []string {
		return []string{"--image-max-decompression-ratio", "1000000000000", "--image-max-size", "1PiB"}
	})
	reg := fixture.NewHostileRegistry(t)
	reg.Image(t, "c", "zeros", fixture.HostileImage{Layers: []fixture.Layer{fixture.ZstdZeros(t, 1000)}})
	tmp := filepath.Join(e.d.Dir, "root", "images", "tmp")
	w := fixture.WatchDir(t, tmp)
	ctx, cancel := context.WithCancel(cctx(t))
	done := make(chan error, 1)
	go func() { done <- pullImage(t, ctx, e, reg.Host+"/c:zeros") }()
	ev := w.Wait(t, rpcTimeout, "the layer's unpack dir", func(ev fixture.DirEvent) bool { return ev.Created && strings.HasPrefix(ev.Name, "unpack-") })
	dir := filepath.Join(tmp, ev.Name)
	w.Add(t, dir)
	if _, err := os.Stat(filepath.Join(dir, "fs")); err != nil {
		w.Wait(t, rpcTimeout, "the layer's fs dir (the unpack starts)", func(ev fixture.DirEvent) bool { return ev.Dir == dir && ev.Name == "fs" })
	}
	cancel()
	cancelled := time.Now()
	w.Wait(t, time.Second, "the unpack dir's removal", func(ev fixture.DirEvent) bool { return ev.Dir == tmp && ev.Name == filepath.Base(dir) && !ev.Created })
	t.Logf("the unpack dir went %s after the cancel", time.Since(cancelled))
	if err := <-done; err == nil {
		t.Fatal("the cancelled pull succeeded")
	}
}

// TestCRIPullDiskFull: with --root on a 16 MiB file system, a pull whose
// blob does not fit, or whose files do not, answers ResourceExhausted
// saying why (before: Unavailable for the blob, Internal for the files),
// leaves nothing, and a pull that fits works after them.
func TestCRIPullDiskFull(t *testing.T) {
	t.Parallel()
	root := fixture.SmallTmpfs(t, "16m")
	e := newCRIEnv(t, func(*criEnv) []string { return []string{"--root", root} })
	reg := fixture.NewHostileRegistry(t)
	noise := make([]byte, 24<<20)
	for i := range noise {
		noise[i] = byte(i*7919 + i>>9)
	}
	reg.Image(t, "f", "blob", fixture.HostileImage{Layers: []fixture.Layer{fixture.RawLayer(noise, v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("5", 64)})}})
	reg.Image(t, "f", "files", fixture.HostileImage{Layers: []fixture.Layer{fixture.GzipBomb(t, 24<<20)}})
	for _, p := range []hostilePull{
		{"f:blob", codes.ResourceExhausted, []string{"no space left on device"}},
		{"f:files", codes.ResourceExhausted, []string{"no space left on device"}},
	} {
		wantPullRefused(t, p, pullImage(t, cctx(t), e, reg.Host+"/"+p.ref))
	}
	for _, d := range []string{"tmp", "layers"} {
		if left, _ := os.ReadDir(filepath.Join(root, "images", d)); len(left) > 0 {
			t.Errorf("images/%s holds %d entries after the full pulls", d, len(left))
		}
	}
	if err := pullImage(t, cctx(t), e, e.pushTestinit(t, "e2e/fits:1")); err != nil {
		t.Fatalf("a pull that fits, after the full ones: %v", err)
	}
}

// TestCRILostLayerRecord: a layer whose record is unreadable when the
// daemon starts is dropped, and its image is no longer reported (it used to
// be, so kubelet never pulled it again and every create failed): ImageStatus
// answers no image, CreateContainer NotFound, and a new pull brings the
// image back for a container to run.
func TestCRILostLayerRecord(t *testing.T) {
	t.Parallel()
	e := newCRIEnv(t)
	ref := e.pushTestinit(t, "e2e/lost:1")
	pulled, err := e.img.PullImage(cctx(t), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatal(err)
	}
	e.d.Stop()
	layers := filepath.Join(e.d.Dir, "root", "images", "layers")
	entries, err := os.ReadDir(layers)
	if err != nil || len(entries) == 0 {
		t.Fatalf("layers: %v %v", entries, err)
	}
	if err := os.WriteFile(filepath.Join(layers, entries[0].Name(), "layer.json"), []byte("{torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	restart(t, e.d)
	st, err := e.img.ImageStatus(cctx(t), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: pulled.ImageRef}})
	if err != nil || st.Image != nil {
		t.Fatalf("ImageStatus of the image that lost a layer: %v, %v; want no image", st.GetImage(), err)
	}
	podCfg := e.podConfig(t, "lost")
	run, err := e.rt.RunPodSandbox(cctx(t), &runtimeapi.RunPodSandboxRequest{Config: podCfg})
	if err != nil {
		t.Fatal(err)
	}
	create := &runtimeapi.CreateContainerRequest{PodSandboxId: run.PodSandboxId, SandboxConfig: podCfg, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Image: &runtimeapi.ImageSpec{Image: ref}, Args: []string{"sleep", "forever"}}}
	_, err = e.rt.CreateContainer(cctx(t), create)
	wantCRICode(t, "CreateContainer of the image that lost a layer", err, codes.NotFound)
	if err := pullImage(t, cctx(t), e, ref); err != nil {
		t.Fatalf("the pull again: %v", err)
	}
	if _, err := e.rt.CreateContainer(cctx(t), create); err != nil {
		t.Fatalf("CreateContainer after the pull again: %v", err)
	}
	// The env's cleanup removes the pod; what a removal leaves is other
	// tests' concern.
}
