package reliability

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/evjournal/containerd/integration/fixture"
)

// serve starts the hostile registry with what the run pulls and creates
// (the cases of integration/e2e's TestCRIPullHostile and
// TestCRIImageFilesHostile that cost the daemon the most).
func (h *hostileRun) serve() error {
	return withFixtures(h.s.env, func(tb testing.TB) {
		reg := fixture.NewHostileRegistry(tb)
		h.reg = reg
		reg.Put("h/manifests/80mb", fixture.Response{ContentType: string(types.OCIManifestSchema1), Body: fixture.EndlessManifest(80 << 20)})
		cfg := v1.Descriptor{MediaType: types.OCIConfigJSON, Size: 900 << 20, Digest: v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("1", 64)}}
		reg.Put("h/blobs/"+cfg.Digest.String(), fixture.Response{Body: fixture.EndlessManifest(900 << 20)})
		reg.Image(tb, "h", "config-900mib", fixture.HostileImage{Manifest: func(m *v1.Manifest) { m.Config = cfg }})
		reg.Image(tb, "h", "zstd-window", fixture.HostileImage{Layers: []fixture.Layer{fixture.ZstdWindow(512 << 20)}})
		reg.Image(tb, "h", "gzip-1gib", fixture.HostileImage{Layers: []fixture.Layer{fixture.GzipBomb(tb, 1<<30)}})
		reg.IndexChain(tb, "h", "deep", 6)
		inv := codes.InvalidArgument
		h.pulls = []hostileCall{{"h:80mb", inv}, {"h:config-900mib", inv}, {"h:zstd-window", inv}, {"h:gzip-1gib", inv}, {"h:deep", inv}}
		etc := func(tag string, e fixture.Entry) {
			reg.Image(tb, "etc", tag, fixture.HostileImage{Layers: []fixture.Layer{rawLayer(tb, fixture.EntriesLayer(tb, fixture.Entry{Name: "etc", Type: tar.TypeDir}, e))}})
			h.creates = append(h.creates, hostileCall{"etc:" + tag, inv})
		}
		etc("passwd-fifo", fixture.Entry{Name: "etc/passwd", Type: tar.TypeFifo})
		etc("group-urandom", fixture.Entry{Name: "etc/group", Type: tar.TypeChar, Mode: 0o666, Major: 1, Minor: 9})
	})
}

// rawLayer serves a built layer as it is.
func rawLayer(tb testing.TB, l v1.Layer) fixture.Layer {
	rc, err := l.Compressed()
	if err != nil {
		tb.Fatal(err)
	}
	defer rc.Close()
	blob, err := io.ReadAll(rc)
	if err != nil {
		tb.Fatal(err)
	}
	diffID, err := l.DiffID()
	if err != nil {
		tb.Fatal(err)
	}
	return fixture.RawLayer(blob, diffID)
}

// startPods pulls the images the creates use and runs two pods: a
// well-behaved one (label rel=good) and the hostile one, whose sleeping
// container the ExecSync floods run in.
func (h *hostileRun) startPods() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, c := range h.creates {
		if _, err := h.n.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: h.reg.Host + "/" + c.ref}}); err != nil {
			return fmt.Errorf("pull %s: %w", c.ref, err)
		}
	}
	if _, _, err := h.runPod(ctx, "good"); err != nil {
		return err
	}
	var err error
	h.podCfg, h.flooder, err = h.runPod(ctx, "hostile")
	return err
}

// runPod runs a host-network pod with one sleeping container of the test
// init, labelled rel=<name>; it returns the pod's config and the container.
func (h *hostileRun) runPod(ctx context.Context, name string) (*runtimeapi.PodSandboxConfig, string, error) {
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "rel", Uid: h.s.env.Tag + "-" + name},
		Hostname:     name,
		LogDirectory: filepath.Join(h.n.logDir, name),
		Linux: &runtimeapi.LinuxPodSandboxConfig{CgroupParent: h.n.podParent, SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE}}},
	}
	ctr := &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: h.n.image},
		Args: []string{"sleep", "forever"}, Labels: map[string]string{"rel": name}}
	podID, err := (fixture.Kubelet{RT: h.n.rt}).EnsurePod(ctx, cfg.Metadata.Uid, func(uint32) *runtimeapi.PodSandboxConfig { return cfg })
	if err != nil {
		return nil, "", fmt.Errorf("run the %s pod: %w", name, err)
	}
	if name == "hostile" {
		h.podID = podID
	}
	id, err := (fixture.Kubelet{RT: h.n.rt}).CreateAndStart(ctx, podID, cfg, ctr)
	if err != nil {
		return nil, "", fmt.Errorf("the %s pod's container: %w", name, err)
	}
	return cfg, id, nil
}

// restartServing waits until a daemon spawned again serves its CRI.
func (n *criNode) restartServing() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := n.d.WaitServing(ctx); err != nil {
		return err
	}
	n.check.DaemonPid = n.d.Pid()
	return nil
}

// leftIn lists what a dir of the image store still holds.
func leftIn(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		out = append(out, filepath.Join(dir, e.Name()))
	}
	return out
}
