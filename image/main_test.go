package image_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evjournal/containerd/image"
	"github.com/evjournal/containerd/integration/fixture"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func TestMain(m *testing.M) { fixture.Main(m) }

// pullLimit bounds each pull of these tests (all from an in-process registry).
const pullLimit = 30 * time.Second

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), pullLimit)
	t.Cleanup(cancel)
	return c
}

// testRegistry is go-containerregistry's in-memory registry behind
// httptest, with hooks: an optional basic-auth check, optional tampering
// of one blob, and a count of the blob downloads.
type testRegistry struct {
	srv  *httptest.Server
	host string // "127.0.0.1:port"

	mu       sync.Mutex
	user     string // when set, requests need this user and password
	password string
	tamper   string         // a blob digest served with one byte flipped
	gets     map[string]int // blob GETs by digest
}

func newRegistry(t *testing.T) *testRegistry {
	t.Helper()
	r := &testRegistry{gets: map[string]int{}}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.serve(inner, w, req)
	}))
	t.Cleanup(r.srv.Close)
	r.host = strings.TrimPrefix(r.srv.URL, "http://")
	return r
}

func (r *testRegistry) serve(inner http.Handler, w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	user, password, tamper := r.user, r.password, r.tamper
	blob := ""
	if i := strings.Index(req.URL.Path, "/blobs/"); i >= 0 && req.Method == http.MethodGet {
		blob = req.URL.Path[i+len("/blobs/"):]
		r.gets[blob]++
	}
	r.mu.Unlock()
	if user != "" {
		if u, p, ok := req.BasicAuth(); !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"who are you"}]}`, http.StatusUnauthorized)
			return
		}
	}
	if blob == "" || blob != tamper {
		inner.ServeHTTP(w, req)
		return
	}
	rec := httptest.NewRecorder()
	inner.ServeHTTP(rec, req)
	body := rec.Body.Bytes()
	body[len(body)/2] ^= 0xff // same length, other bytes
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(body)
}

func (r *testRegistry) setAuth(user, password string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.user, r.password = user, password
}

func (r *testRegistry) setTamper(digest string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tamper = digest
}

// blobGets is how many times each blob was downloaded, and resets the count.
func (r *testRegistry) blobGets() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.gets
	r.gets = map[string]int{}
	return g
}

// push writes img (or an index) to repoTag ("repo:tag") on the registry.
func (r *testRegistry) push(t *testing.T, repoTag string, img v1.Image) name.Reference {
	t.Helper()
	ref, err := name.ParseReference(r.host + "/" + repoTag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return ref
}

func (r *testRegistry) pushIndex(t *testing.T, repoTag string, idx v1.ImageIndex) {
	t.Helper()
	ref, err := name.ParseReference(r.host + "/" + repoTag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
}

// It is built once: the same layer serves every test.
func baseLayer(t *testing.T) v1.Layer {
	t.Helper()
	baseOnce.Do(func() { base = makeBaseLayer(t) })
	if base == nil {
		t.Fatal("the base layer could not be built (see the first test that failed)")
	}
	return base
}

var (
	baseOnce sync.Once
	base     v1.Layer
)

func makeBaseLayer(t *testing.T) v1.Layer {
	t.Helper()
	init, err := os.ReadFile(fixture.Testinit(t))
	if err != nil {
		t.Fatal(err)
	}
	return fixture.LayerOf(t,
		fixture.File{Name: "testinit", Body: string(init), Mode: 0o755},
		fixture.File{Name: "etc", Dir: true},
		fixture.File{Name: "etc/owned", Body: "mine", UID: 1000, GID: 1000, Mode: 0o640},
		fixture.File{Name: "etc/xattr", Body: "x", Xattrs: map[string]string{"user.test": "kept"}},
		fixture.File{Name: "etc/gone", Body: "deleted above"},
		fixture.File{Name: "data", Dir: true},
		fixture.File{Name: "data/old", Body: "old"},
		fixture.File{Name: "data/sub", Dir: true},
		fixture.File{Name: "data/sub/older", Body: "older"},
	)
}

// upperLayer deletes etc/gone (a whiteout) and replaces data/ (an opaque
// whiteout plus new content).
func upperLayer(t *testing.T) v1.Layer {
	return fixture.LayerOf(t,
		fixture.File{Name: "etc", Dir: true},
		fixture.File{Name: "etc/.wh.gone"},
		fixture.File{Name: "data", Dir: true, Mode: 0o750},
		fixture.File{Name: "data/.wh..wh..opq"},
		fixture.File{Name: "data/new", Body: "new"},
	)
}

var testConfig = v1.Config{
	Entrypoint: []string{"/testinit"}, Cmd: []string{"echo", "hi"},
	Env: []string{"PATH=/", "A=b"}, WorkingDir: "/data", User: "1000:1000",
}

// newStore opens a store in a fresh dir. Its cleanup removes every rootfs
// the test left, then fails the test if a mount under the dir remains.
func newStore(t *testing.T, opts image.Options) (*image.Store, string) {
	t.Helper()
	root := t.TempDir()
	s, err := image.Open(root, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, r := range s.ListRootfs() {
			if err := s.RemoveRootfs(r.ContainerID); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
		if m := fixture.MountsUnder(t, root); len(m) > 0 {
			t.Errorf("mounts left under %s: %v", root, m)
		}
	})
	return s, root
}

// entries lists a dir's names; a missing dir has none.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// wantEmptyStore checks that nothing is recorded, unpacked or left in tmp.
func wantEmptyStore(t *testing.T, s *image.Store, root string) {
	t.Helper()
	for _, d := range []string{"images", "layers", "containers", "tmp"} {
		if e := entries(t, filepath.Join(root, d)); len(e) > 0 {
			t.Errorf("%s/ holds %v, want nothing", d, e)
		}
	}
	if l := s.List(); len(l) > 0 {
		t.Errorf("List = %v, want no image", l)
	}
}
