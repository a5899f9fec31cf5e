package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/evjournal/containerd/integration/fixture"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// hostilePull is a pull from a lying registry and what it must answer.
type hostilePull struct {
	ref   string // below the registry's host
	code  codes.Code
	words []string // the message names each
}

// serveHostile makes reg serve one image per way a registry can lie or an
// image can hurt, and returns the pulls with the answers they must get;
// this part is what is too big.
func serveHostile(t *testing.T, reg *fixture.HostileRegistry) []hostilePull {
	const big = 80 << 20
	reg.Put("h/manifests/80mb", fixture.Response{ContentType: string(types.OCIManifestSchema1), Body: fixture.EndlessManifest(big)})
	cfg := func(tag string, size int64, hex string) {
		d := v1.Descriptor{MediaType: types.OCIConfigJSON, Size: size, Digest: v1.Hash{Algorithm: "sha256", Hex: strings.Repeat(hex, 64)}}
		reg.Put("h/blobs/"+d.Digest.String(), fixture.Response{Body: fixture.EndlessManifest(900 << 20)})
		reg.Image(t, "h", tag, fixture.HostileImage{Manifest: func(m *v1.Manifest) { m.Config = d }})
	}
	cfg("config-900mib", 900<<20, "1")
	cfg("config-liar", 1000, "2")
	layers := func(tag string, ls ...fixture.Layer) { reg.Image(t, "h", tag, fixture.HostileImage{Layers: ls}) }
	layers("zstd-window", fixture.ZstdWindow(512<<20))
	layers("gzip-1gib", fixture.GzipBomb(t, 1<<30))
	var many []fixture.Layer
	for i := range 10000 {
		many = append(many, fixture.RawLayer([]byte(strconv.Itoa(i)), v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%064x", i)}))
	}
	layers("10000-layers", many...)
	reg.IndexChain(t, "h", "deep", 6)
	return append([]hostilePull{
		{"h:80mb", codes.InvalidArgument, []string{"manifest 80mb", "manifest size bound of 4194304"}},
		{"h:config-900mib", codes.InvalidArgument, []string{"config sha256:111", "config size bound of 4194304"}},
		{"h:config-liar", codes.DataLoss, []string{"config sha256:222"}},
		{"h:zstd-window", codes.InvalidArgument, []string{"window bound"}},
		{"h:gzip-1gib", codes.InvalidArgument, []string{"decompression ratio bound"}},
		{"h:10000-layers", codes.InvalidArgument, []string{"10000 layers", "layer count bound of 128"}},
		{"h:deep", codes.InvalidArgument, []string{"index depth bound"}},
	}, serveLies(t, reg)...)
}

// serveLies makes reg serve images whose content is not what it claims.
func serveLies(t *testing.T, reg *fixture.HostileRegistry) []hostilePull {
	layers := func(tag string, ls ...fixture.Layer) { reg.Image(t, "h", tag, fixture.HostileImage{Layers: ls}) }
	honest := reg.Image(t, "h", "", fixture.HostileImage{})
	r := reg.Response("h/manifests/" + honest.Digest.String())
	r.ContentType = string(types.OCIImageIndex)
	reg.Put("h/manifests/served-as-index", r)
	junk := bytes.Repeat([]byte("not a tar "), 200)
	layers("not-a-tar", fixture.RawLayer(junk, fixture.Descriptor("", junk).Digest))
	layers("traversal", fixture.TarLayer(t, fixture.File{Name: "../../../escaped", Body: "x"}))
	tampered := fixture.RawLayer(junk, v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("3", 64)})
	tampered.Desc.Digest = tampered.DiffID
	layers("tampered", tampered)
	wrongDiff := fixture.TarLayer(t, fixture.File{Name: "f", Body: "x"})
	wrongDiff.DiffID = v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("4", 64)}
	layers("wrong-diff-id", wrongDiff)
	inv := codes.InvalidArgument
	return []hostilePull{
		{"h:served-as-index", inv, []string{"served as " + string(types.OCIImageIndex)}},
		{"h:not-a-tar", inv, []string{"the layer is malformed"}},
		{"h:traversal", inv, []string{"escaped"}},
		{"h:tampered", codes.DataLoss, []string{"does not match its digest"}},
		{"h:wrong-diff-id", codes.DataLoss, []string{"diff id is sha256:444"}},
	}
}

// TestCRIPullHostile: pulls from a registry that lies, through the CRI,
// answer the code of their class (InvalidArgument naming the bound and the
// blob for what is too big or malformed, DataLoss for content that is not
// what its descriptor says; before, Internal for the malformed layers), and
// the daemon stays small while they run: an 80 MB manifest, a 900 MiB
// config and a 512 MiB zstd window used to cost it 0.8, 1.7 and 0.5 GB. The
// 1 GiB gzip bomb is stopped at the ratio bound (100 MB), not by the
// 512 MiB --root it used to fill. Nothing is left in the store, and a good
// image pulls after them.
func TestCRIPullHostile(t *testing.T) {
	t.Parallel()
	root := fixture.SmallTmpfs(t, "512m")
	e := newCRIEnv(t, func(*criEnv) []string { return []string{"--root", root} })
	reg := fixture.NewHostileRegistry(t)
	pulls := serveHostile(t, reg)
	pid := e.d.Pid()
	base := procStatusKB(t, pid, "VmRSS")
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Fatalf("reset the daemon's peak RSS: %v", err)
	}
	for _, p := range pulls {
		_, err := e.img.PullImage(cctx(t), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: reg.Host + "/" + p.ref}})
		wantPullRefused(t, p, err)
	}
	peak := procStatusKB(t, pid, "VmHWM")
	t.Logf("daemon RSS %d MiB before the hostile pulls, %d MiB at their peak", base>>10, peak>>10)
	if peak-base > 200<<10 {
		t.Errorf("the daemon grew by %d MiB during the hostile pulls, want at most 200", (peak-base)>>10)
	}
	if l, err := e.img.ListImages(cctx(t), &runtimeapi.ListImagesRequest{}); err != nil || len(l.Images) != 0 {
		t.Errorf("images after the refused pulls: %v, %v", l.GetImages(), err)
	}
	for _, d := range []string{"tmp", "layers"} {
		if left, _ := os.ReadDir(filepath.Join(root, "images", d)); len(left) > 0 {
			t.Errorf("images/%s holds %d entries after the refused pulls", d, len(left))
		}
	}
	ref := e.pushTestinit(t, "e2e/after:1")
	if _, err := e.img.PullImage(cctx(t), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
		t.Fatalf("a good pull after the hostile ones: %v", err)
	}
}

func wantPullRefused(t *testing.T, p hostilePull, err error) {
	t.Helper()
	if status.Code(err) != p.code {
		t.Errorf("pull %s: %v, want %v", p.ref, err, p.code)
		return
	}
	for _, w := range p.words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("pull %s: %v, want it to name %q", p.ref, err, w)
		}
	}
}

// procStatusKB is a "Name: N kB" line of /proc/pid/status.
func procStatusKB(t *testing.T, pid int, name string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q", name, line)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", name, pid)
	return 0
}
