// Command registry is the image registry of `make kubelet-e2e`
// (integration/kubelet/run.sh): go-containerregistry's in-memory registry on
// a loopback port, holding one image made of the test init (bin/testinit as
// /testinit, its entrypoint). It writes "HOST REF" to -ready once the image
// is pushed, then serves until killed.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	goruntime "runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	testinit := flag.String("testinit", "bin/testinit", "the static test init to put in the image")
	repo := flag.String("repo", "e2e/testinit:1", "repository and tag of the image")
	ready := flag.String("ready", "", "file to write \"HOST REF\" to once the image is pushed")
	verbose := flag.Bool("v", false, "log every request")
	flag.Parse()
	if err := run(*addr, *testinit, *repo, *ready, *verbose); err != nil {
		log.Fatalf("registry: %v", err)
	}
}

func run(addr, testinit, repo, ready string, verbose bool) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	logger := log.New(io.Discard, "", 0)
	if verbose {
		logger = log.New(os.Stderr, "registry: ", log.LstdFlags)
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(logger)), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	host := ln.Addr().String()
	img, err := testinitImage(testinit)
	if err != nil {
		return err
	}
	ref, err := name.ParseReference(host+"/"+repo, name.Insecure)
	if err != nil {
		return err
	}
	if err := remote.Write(ref, img); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	log.Printf("registry: serving %s, pushed %s (%s)", host, ref, digest)
	if ready != "" {
		tmp := ready + ".tmp"
		if err := os.WriteFile(tmp, fmt.Appendf(nil, "%s %s\n", host, ref), 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, ready); err != nil {
			return err
		}
	}
	return <-errc
}

// testinitImage is one layer (/testinit, /etc, /tmp) with /testinit as the
// entrypoint and "sleep forever" as the default command.
func testinitImage(path string) (v1.Image, error) {
	body, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	layer, err := layerOf([]entry{
		{name: "testinit", body: body, mode: 0o755},
		{name: "etc", dir: true, mode: 0o755},
		{name: "tmp", dir: true, mode: 0o1777},
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", goruntime.GOARCH
	cf.Config = v1.Config{Entrypoint: []string{"/testinit"}, Cmd: []string{"sleep", "forever"}}
	return mutate.ConfigFile(img, cf)
}

type entry struct {
	name string
	body []byte
	mode int64
	dir  bool
}

// layerOf makes a gzipped tar layer of the entries, compressed once here.
func layerOf(entries []entry) (v1.Layer, error) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Typeflag: tar.TypeReg, Size: int64(len(e.body)),
			ModTime: time.Unix(1700000000, 0), Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	b := gz.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
}
