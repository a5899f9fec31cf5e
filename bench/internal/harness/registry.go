package harness

import (
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
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

// PushImage pushes an image of one layer holding files, with config cfg,
// as repoTag and returns the name to pull it by.
func (r *Registry) PushImage(repoTag string, cfg v1.Config, files ...fixture.File) (string, error) {
	layer, err := fixture.BuildLayer(files...)
	if err != nil {
		return "", err
	}
	img, err := fixture.BuildImage(cfg, layer)
	if err != nil {
		return "", err
	}
	ref, err := name.ParseReference(r.Host + "/" + repoTag)
	if err != nil {
		return "", err
	}
	return ref.String(), remote.Write(ref, img)
}

// HostFiles are the host's binaries at paths (absolute) as layer files at
// the same paths, with the shared libraries ldd lists for them and the
// dirs above each: a dynamically linked program (/bin/true) that runs in an
// image of its own.
func HostFiles(paths ...string) ([]fixture.File, error) {
	want := map[string]bool{}
	var order []string
	add := func(p string) {
		if !want[p] {
			want[p] = true
			order = append(order, p)
		}
	}
	for _, p := range paths {
		add(p)
		out, err := exec.Command("ldd", p).Output()
		if err != nil {
			continue // static: no libraries
		}
		for line := range strings.Lines(string(out)) {
			for _, f := range strings.Fields(line) {
				if strings.HasPrefix(f, "/") {
					add(f)
				}
			}
		}
	}
	dirs := map[string]bool{}
	var files []fixture.File
	for _, p := range order {
		rel := strings.TrimPrefix(filepath.Clean(p), "/")
		for d := filepath.Dir(rel); d != "."; d = filepath.Dir(d) {
			dirs[d] = true
		}
		body, err := os.ReadFile(p) // through symlinks: the layer holds regular files
		if err != nil {
			return nil, err
		}
		files = append(files, fixture.File{Name: rel, Body: string(body), Mode: 0o755})
	}
	var dirList []string
	for d := range dirs {
		dirList = append(dirList, d)
	}
	sort.Strings(dirList) // parents before children
	var out []fixture.File
	for _, d := range dirList {
		out = append(out, fixture.File{Name: d, Dir: true})
	}
	return append(out, files...), nil
}
