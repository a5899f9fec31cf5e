package image_test

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/image"
	"github.com/evjournal/containerd/integration/fixture"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// tlsRegistry is an in-memory registry served over TLS with a
// certificate of ca (and, with clientCA, wanting a client certificate of
// it), and over plain http to push to. It counts the requests it is sent
// over TLS.
type tlsRegistry struct {
	push *testRegistry // the same content, over plain http
	host string        // the TLS server's 127.0.0.1:port

	mu       sync.Mutex
	requests []string // "GET /v2/...?query"
}

func newTLSRegistry(t *testing.T, ca, clientCA *fixture.CA) *tlsRegistry {
	t.Helper()
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r := &tlsRegistry{push: &testRegistry{gets: map[string]int{}}}
	r.push.srv = httptest.NewServer(inner)
	t.Cleanup(r.push.srv.Close)
	r.push.host = strings.TrimPrefix(r.push.srv.URL, "http://")
	r.host = fixture.ServeTLS(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.requests = append(r.requests, req.Method+" "+req.URL.RequestURI())
		r.mu.Unlock()
		inner.ServeHTTP(w, req)
	}), ca, clientCA)
	return r
}

// took is the requests sent since the last call.
func (r *tlsRegistry) took() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.requests
	r.requests = nil
	return out
}

func countPrefix(reqs []string, prefix string) int {
	n := 0
	for _, r := range reqs {
		if strings.HasPrefix(r, prefix) {
			n++
		}
	}
	return n
}

// hostsDir writes files (path relative to the dir: content) into a new
// hosts dir.
func hostsDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		writeFile(t, filepath.Join(dir, p), content)
	}
	return dir
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// nsDir is the hosts dir name of a host:port, as containerd's first choice.
func nsDir(host string) string { return strings.Replace(host, ":", "_", 1) + "_" }

// TestHostsTLSPrivateCA: a registry whose certificate a private CA signed
// cannot be pulled from until its hosts.toml names the CA, or says
// skip_verify; each edit of the file is taken at the next pull.
func TestHostsTLSPrivateCA(t *testing.T) {
	fixture.RequireRoot(t)
	ca := fixture.NewCA(t, "private CA")
	reg := newTLSRegistry(t, ca, nil)
	reg.push.push(t, "app:1", fixture.ImageOf(t, testConfig, baseLayer(t)))
	dir := hostsDir(t, map[string]string{"ca.pem": string(ca.PEM)})
	s, root := newStore(t, image.Options{HostsDir: dir})
	ref := reg.host + "/app:1"
	hosts := filepath.Join(dir, nsDir(reg.host), "hosts.toml")

	// No configuration, then an https server without the CA.
	for _, conf := range []string{"", `server = "https://` + reg.host + `"`} {
		if conf != "" {
			writeFile(t, hosts, conf)
		}
		_, err := s.Pull(ctx(t), ref, nil)
		if err == nil || !strings.Contains(err.Error(), "x509: certificate signed by unknown authority") || !errdefs.IsUnavailable(err) {
			t.Fatalf("pull with config %q: %v, want Unavailable: unknown authority", conf, err)
		}
		t.Logf("config %q: %v", conf, err)
		wantEmptyStore(t, s, root)
	}
	for _, conf := range []string{
		"server = \"https://" + reg.host + "\"\nca = \"../ca.pem\"", // relative to the file's dir
		"ca = [\"" + filepath.Join(dir, "ca.pem") + "\"]",           // the namespace's host is the server
		"skip_verify = true",
	} {
		writeFile(t, hosts, conf)
		reg.took()
		img, err := s.Pull(ctx(t), ref, nil)
		if err != nil {
			t.Fatalf("pull with config %q: %v", conf, err)
		}
		if reqs := reg.took(); countPrefix(reqs, "GET /v2/app/manifests/1") != 1 {
			t.Fatalf("config %q: the TLS registry was sent %v, want the manifest asked for", conf, reqs)
		}
		if err := s.Remove(img.ID); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHostsMirrorFirst: the hosts of a hosts.toml are tried in file order
// before the server: the first mirror lacks the image, the second has it
// and serves the whole pull (told the namespace, ?ns=), the server is sent
// nothing. A mirror that may only pull is never asked what a tag names:
// the server resolves it, the mirror serves that digest (its own, other
// image under the tag is never taken).
func TestHostsMirrorFirst(t *testing.T) {
	fixture.RequireRoot(t)
	ca := fixture.NewCA(t, "private CA")
	upstream, empty, mirror := newTLSRegistry(t, ca, nil), newTLSRegistry(t, ca, nil), newTLSRegistry(t, ca, nil)
	good := fixture.ImageOf(t, testConfig, baseLayer(t))
	upstream.push.push(t, "app:1", good)
	mirror.push.push(t, "app:1", good)
	const ns = "registry.invalid" // never reached: .invalid does not resolve
	dir := hostsDir(t, map[string]string{"ca.pem": string(ca.PEM), ns + "/hosts.toml": `
server = "https://` + upstream.host + `"
ca = "../ca.pem"
[host."https://` + empty.host + `"]
  ca = "../ca.pem"
[host."https://` + mirror.host + `"]
  ca = "../ca.pem"
  capabilities = ["pull", "resolve"]
`})
	s, _ := newStore(t, image.Options{HostsDir: dir})
	img, err := s.Pull(ctx(t), ns+"/app:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := good.ConfigName()
	if img.ID != want.String() || img.RepoTags[0] != ns+"/app:1" {
		t.Fatalf("pulled %s %v, want %s named %s/app:1", img.ID, img.RepoTags, want, ns)
	}
	if reqs := empty.took(); countPrefix(reqs, "GET /v2/app/manifests/1?ns="+ns) != 1 {
		t.Errorf("the first mirror was sent %v, want the manifest asked for (with ns)", reqs)
	}
	if reqs := mirror.took(); countPrefix(reqs, "GET /v2/app/blobs/") < 2 || countPrefix(reqs, "GET /v2/app/manifests/1?ns="+ns) != 1 {
		t.Errorf("the second mirror was sent %v, want the manifest and every blob", reqs)
	}
	if reqs := upstream.took(); len(reqs) > 0 {
		t.Errorf("the server was sent %v, want nothing", reqs)
	}
	if err := s.Remove(img.ID); err != nil {
		t.Fatal(err)
	}

	// A pull-only mirror holding another image under the tag.
	other := fixture.ImageOf(t, v1.Config{Cmd: []string{"other"}}, baseLayer(t))
	mirror.push.push(t, "app:1", other)
	writeFile(t, filepath.Join(dir, ns, "hosts.toml"), `
server = "https://`+upstream.host+`"
ca = "../ca.pem"
[host."https://`+mirror.host+`"]
  ca = "../ca.pem"
  capabilities = ["pull"]
`)
	mirror.push.push(t, "app:kept", good) // the mirror has the upstream's image too, by digest
	img, err = s.Pull(ctx(t), ns+"/app:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if img.ID != want.String() {
		t.Fatalf("pulled %s through a pull-only mirror, want the server's %s", img.ID, want)
	}
	d, _ := good.Digest()
	if reqs := upstream.took(); countPrefix(reqs, "GET /v2/app/manifests/1") != 1 || countPrefix(reqs, "GET /v2/app/blobs/") > 0 {
		t.Errorf("the server was sent %v, want the tag resolved and no blob", reqs)
	}
	if reqs := mirror.took(); countPrefix(reqs, "GET /v2/app/manifests/1") > 0 || countPrefix(reqs, "GET /v2/app/manifests/"+d.String()) != 1 ||
		countPrefix(reqs, "GET /v2/app/blobs/") < 2 {
		t.Errorf("the pull-only mirror was sent %v, want the digest's manifest and the blobs, never the tag", reqs)
	}
}

// TestHostsClientCertificate: a registry that wants a client certificate
// of its CA refuses a pull without one, and serves it with the client
// pair of its hosts.toml, as a [cert, key] pair or one PEM file with both.
func TestHostsClientCertificate(t *testing.T) {
	fixture.RequireRoot(t)
	ca, clientCA := fixture.NewCA(t, "server CA"), fixture.NewCA(t, "client CA")
	reg := newTLSRegistry(t, ca, clientCA)
	reg.push.push(t, "app:1", fixture.ImageOf(t, testConfig, baseLayer(t)))
	cert, key := clientCA.Issue(t, true)
	strangerCert, strangerKey := fixture.NewCA(t, "another CA").Issue(t, true)
	ns := nsDir(reg.host)
	dir := hostsDir(t, map[string]string{
		"ca.pem": string(ca.PEM), "client.cert": string(cert), "client.key": string(key), "both.pem": string(cert) + string(key),
		"stranger.cert": string(strangerCert), "stranger.key": string(strangerKey),
	})
	s, root := newStore(t, image.Options{HostsDir: dir})
	ref := reg.host + "/app:1"
	for _, client := range []string{"", `client = [["../stranger.cert", "../stranger.key"]]`} {
		writeFile(t, filepath.Join(dir, ns, "hosts.toml"), "ca = \"../ca.pem\"\n"+client)
		_, err := s.Pull(ctx(t), ref, nil)
		if err == nil || !strings.Contains(err.Error(), "tls: ") {
			t.Fatalf("pull with %q: %v, want a TLS error", client, err)
		}
		t.Logf("client %q: %v", client, err)
		wantEmptyStore(t, s, root)
	}
	for _, client := range []string{`client = [["../client.cert", "../client.key"]]`, `client = "../both.pem"`} {
		writeFile(t, filepath.Join(dir, ns, "hosts.toml"), "ca = \"../ca.pem\"\n"+client)
		img, err := s.Pull(ctx(t), ref, nil)
		if err != nil {
			t.Fatalf("pull with %s: %v", client, err)
		}
		if err := s.Remove(img.ID); err != nil {
			t.Fatal(err)
		}
	}
	// A pair that cannot be read fails naming the file.
	writeFile(t, filepath.Join(dir, ns, "hosts.toml"), "ca = \"../ca.pem\"\nclient = [[\"../client.cert\", \"../gone.key\"]]")
	if _, err := s.Pull(ctx(t), ref, nil); !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), filepath.Join(dir, "gone.key")) {
		t.Fatalf("a missing key: %v, want InvalidArgument naming it", err)
	}
}
