package image

import (
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

// TestChainIDs: the first chain id is the first diff id; the next ones
// follow the OCI formula, sha256 of "<parent chain id> <diff id>".
func TestChainIDs(t *testing.T) {
	a := "sha256:" + strings.Repeat("a", 64)
	b := "sha256:" + strings.Repeat("b", 64)
	got, err := chainIDs([]string{a, b})
	if err != nil {
		t.Fatal(err)
	}
	// printf 'sha256:aaa…a sha256:bbb…b' | sha256sum
	const want = "sha256:ccd722928bd92476ba1745586fed6e45a102504185ad88cd89e01ff116fd146c"
	if len(got) != 2 || got[0] != a || got[1] != want {
		t.Fatalf("chain ids %v", got)
	}
	for _, bad := range []string{"", "sha256:../../etc", "sha512:" + strings.Repeat("a", 64), "sha256:" + strings.Repeat("A", 64)} {
		if _, err := chainIDs([]string{a, bad}); !errdefs.IsInvalidArgument(err) {
			t.Errorf("diff id %q: %v, want invalid argument", bad, err)
		}
	}
}

func TestParseRef(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"busybox", "docker.io/library/busybox:latest"},
		{"busybox:1.29", "docker.io/library/busybox:1.29"},
		{"docker.io/library/busybox:1.29", "docker.io/library/busybox:1.29"},
		{"index.docker.io/library/busybox:1.29", "docker.io/library/busybox:1.29"},
		{"me/app", "docker.io/me/app:latest"},
		{"registry.k8s.io/pause:3.10", "registry.k8s.io/pause:3.10"},
		{"localhost:5000/a/b/c:t", "localhost:5000/a/b/c:t"},
		{"busybox@sha256:" + strings.Repeat("1", 64), "docker.io/library/busybox@sha256:" + strings.Repeat("1", 64)},
	} {
		r, err := parseRef(tc.in)
		if err != nil || r.canonical != tc.want {
			t.Errorf("parseRef(%q) = %q, %v; want %q", tc.in, r.canonical, err, tc.want)
		}
	}
}

// TestMountOptions: layers are named relative to layers/, top first, and a
// stack too long for one page is refused before any mount.
func TestMountOptions(t *testing.T) {
	layers := func(n int) []string {
		var l []string
		for i := range n {
			l = append(l, "sha256:"+strings.Repeat(string(rune('a'+i%6)), 63)+string(rune('0'+i%10)))
		}
		return l
	}
	rec := rootfsRecord{ContainerID: "c1", Layers: layers(2)}
	got, err := mountOptions(rec)
	if err != nil {
		t.Fatal(err)
	}
	wantPrefix := "lowerdir=" + strings.TrimPrefix(rec.Layers[1], "sha256:") + "/fs:" + strings.TrimPrefix(rec.Layers[0], "sha256:") +
		"/fs,upperdir=../containers/c1/upper,workdir=../containers/c1/work"
	if !strings.HasPrefix(got, wantPrefix) {
		t.Errorf("options %q, want prefix %q", got, wantPrefix)
	}
	long := strings.Repeat("x", maxIDLength)
	if _, err := mountOptions(rootfsRecord{ContainerID: long, Layers: layers(56)}); err != nil {
		t.Errorf("56 layers with the longest id: %v", err)
	}
	if _, err := mountOptions(rootfsRecord{ContainerID: long, Layers: layers(57)}); !errdefs.IsInvalidArgument(err) {
		t.Errorf("57 layers with the longest id: %v, want invalid argument", err)
	}
	if _, err := mountOptions(rootfsRecord{ContainerID: "c1"}); !errdefs.IsInvalidArgument(err) {
		t.Errorf("no layer: %v, want invalid argument", err)
	}
}
