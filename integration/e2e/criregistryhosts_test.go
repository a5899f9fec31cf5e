package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evjournal/containerd/integration/fixture"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestCRIRegistryHostsTLS: a daemon given --registry-config-path pulls
// from a registry served over TLS with a certificate of a CA the test
// makes only once the registry's hosts.toml names the CA (written while
// the daemon runs: no restart), runs a container from it, and pulls a
// name of another registry host through a mirror its hosts.toml lists.
func TestCRIRegistryHostsTLS(t *testing.T) {
	t.Parallel()
	hosts := t.TempDir()
	e := newCRIEnv(t, func(*criEnv) []string { return []string{"--registry-config-path", hosts} })
	ca := fixture.NewCA(t, "e2e private CA")
	tlsHost := e.reg.ServeTLS(t, ca, nil)
	e.reg.Push(t, "e2e/hosts:1", fixture.TestinitImage(t, v1.Config{Cmd: []string{"sleep", "forever"}}))
	ref := tlsHost + "/e2e/hosts:1"
	pull := func(image string) (*runtimeapi.PullImageResponse, error) {
		return e.img.PullImage(cctx(t), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: image}})
	}

	_, err := pull(ref)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "x509: certificate signed by unknown authority") {
		t.Fatalf("pull over TLS of an unknown CA: %v, want Unavailable: unknown authority", err)
	}
	nsDir := filepath.Join(hosts, strings.Replace(tlsHost, ":", "_", 1)+"_")
	if err := os.MkdirAll(nsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(nsDir, "ca.pem"), ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(nsDir, "hosts.toml"), []byte(`ca = "ca.pem"`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := pull(ref); err != nil {
		t.Fatalf("pull with the CA in hosts.toml: %v", err)
	}
	_, podID, cid := runSleeper(t, e, "hosts-tls", ref, nil)
	if ex, err := execSync(t, e, cid, "echo pulled over TLS"); err != nil || strings.TrimSpace(string(ex.Stdout)) != "pulled over TLS" {
		t.Fatalf("a container of the image pulled over TLS: %q %v", ex.GetStdout(), err)
	}
	removePod(t, e, podID)

	// A registry host the node cannot reach, mirrored by the TLS registry.
	const ns = "mirrored.invalid"
	if err := os.MkdirAll(filepath.Join(hosts, ns), 0o755); err != nil {
		t.Fatal(err)
	}
	conf := "[host.\"https://" + tlsHost + "\"]\n  ca = \"" + filepath.Join(nsDir, "ca.pem") + "\"\n"
	if err := os.WriteFile(filepath.Join(hosts, ns, "hosts.toml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := pull(ns + "/e2e/hosts:1")
	if err != nil {
		t.Fatalf("pull through the mirror of hosts.toml: %v", err)
	}
	st, err := e.img.ImageStatus(cctx(t), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: got.ImageRef}})
	if err != nil || !strings.Contains(strings.Join(st.GetImage().GetRepoTags(), " "), ns+"/e2e/hosts:1") {
		t.Fatalf("the mirrored image's status: %v %v, want it named %s/e2e/hosts:1", st, err, ns)
	}
}
