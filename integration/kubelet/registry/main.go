// Command registry is the image registry of `make kubelet-e2e`
// (integration/kubelet/run.sh): go-containerregistry's in-memory registry on
// a loopback port, holding one image made of the test init (bin/testinit as
// /testinit, its entrypoint). It writes "HOST REF" to -ready once the image
// is pushed, then serves until killed.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/evjournal/containerd/integration/imagebuild"
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
	layer, err := imagebuild.FilesLayer(
		imagebuild.Entry{Name: "testinit", Content: string(body), Mode: 0o755},
		imagebuild.Entry{Name: "etc", Dir: true},
		imagebuild.Entry{Name: "tmp", Dir: true, Mode: 0o1777},
	)
	if err != nil {
		return nil, err
	}
	return imagebuild.Image(empty.Image, v1.Config{Entrypoint: []string{"/testinit"}, Cmd: []string{"sleep", "forever"}}, layer)
}
