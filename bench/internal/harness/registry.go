package harness

import (
	"io"
	"log"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/evjournal/containerd/integration/fixture"
)

// Registry is an in-memory image registry on 127.0.0.1 for the run (the
// CRI's pulls), closed at Env.Close. Host is what --insecure-registry takes.
type Registry struct {
	Host string
}

// NewRegistry starts an empty registry.
func (e *Env) NewRegistry() *Registry {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	e.Defer(srv.Close)
	return &Registry{Host: strings.TrimPrefix(srv.URL, "http://")}
}

// PushTestinit pushes an image of the test init (entrypoint /testinit,
// cmd given) as repoTag and returns the name to pull it by.
func (r *Registry) PushTestinit(testinit, repoTag string, cmd ...string) (string, error) {
	body, err := os.ReadFile(testinit)
	if err != nil {
		return "", err
	}
	layer, err := fixture.BuildLayer(fixture.TestinitFiles(body)...)
	if err != nil {
		return "", err
	}
	img, err := fixture.BuildImage(v1.Config{Entrypoint: []string{"/testinit"}, Cmd: cmd}, layer)
	if err != nil {
		return "", err
	}
	ref, err := name.ParseReference(r.Host + "/" + repoTag)
	if err != nil {
		return "", err
	}
	return ref.String(), remote.Write(ref, img)
}
