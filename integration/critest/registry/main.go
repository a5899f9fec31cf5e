// Command registry serves an OCI registry (go-containerregistry's
// pkg/registry, in memory) and pushes into it the images critest pulls,
// rebuilt offline from Debian binaries that integration/critest/run.sh stages
// in directories. The daemon under test reaches it as a registry mirror of
// registry.k8s.io and gcr.io, so the images keep their original paths and
// tags: registry.k8s.io/e2e-test-images/busybox:1.29-2 is pushed as
// 127.0.0.1:5000/e2e-test-images/busybox:1.29-2.
//
// It writes the list of what it pushed (reference and digest) to -ready
// once every image is in, then serves until SIGTERM or SIGINT.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"

	"github.com/evjournal/containerd/integration/imagebuild"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:5000", "address to serve the registry on")
	stage := flag.String("stage", "", "directory staged by run.sh: busybox/, nginx/, hostnet-nginx/, httpd/, nonewprivs/ (root filesystem trees)")
	ready := flag.String("ready", "", "file written with the pushed references once all are pushed")
	verbose := flag.Bool("v", false, "log every registry request")
	flag.Parse()
	if *stage == "" {
		log.Fatal("-stage is required")
	}
	if err := run(*addr, *stage, *ready, *verbose); err != nil {
		log.Fatal(err)
	}
}

func run(addr, stage, ready string, verbose bool) error {
	return imagebuild.Serve(addr, ready, verbose, func() (map[string]v1.Image, error) { return buildImages(stage) })
}

// buildImages returns every image critest v1.34 pulls (on Linux), keyed by
// its reference without the registry host (the mirror keeps paths and tags).
func buildImages(stage string) (map[string]v1.Image, error) {
	dir := func(n string) string { return filepath.Join(stage, n) }
	base, err := imagebuild.DirLayer(dir("busybox"))
	if err != nil {
		return nil, err
	}
	busybox, err := imagebuild.Image(empty.Image, v1.Config{Cmd: []string{"sh"}}, base)
	if err != nil {
		return nil, err
	}
	layered := func(cfg v1.Config, dirs ...string) (v1.Image, error) {
		layers := []v1.Layer{base}
		for _, d := range dirs {
			l, err := imagebuild.DirLayer(dir(d))
			if err != nil {
				return nil, err
			}
			layers = append(layers, l)
		}
		return imagebuild.Image(empty.Image, cfg, layers...)
	}
	withFile := func(file string) (v1.Image, error) {
		l, err := imagebuild.FilesLayer(imagebuild.Entry{Name: file})
		if err != nil {
			return nil, err
		}
		return imagebuild.Image(busybox, v1.Config{Cmd: []string{"sh"}}, l)
	}
	withUser := func(user string) (v1.Image, error) {
		return imagebuild.Image(busybox, v1.Config{Cmd: []string{"sh"}, User: user})
	}

	const e2e = "e2e-test-images/"
	const cri = "k8s-staging-cri-tools/"
	out := map[string]v1.Image{e2e + "busybox:1.29-2": busybox}
	add := func(ref string, img v1.Image, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", ref, err)
		}
		out[ref] = img
		return nil
	}
	nginxCfg := v1.Config{
		Cmd:          []string{"nginx", "-g", "daemon off;"},
		ExposedPorts: map[string]struct{}{"80/tcp": {}},
	}
	hostnetCfg := v1.Config{
		Cmd:          []string{"nginx", "-g", "daemon off;"},
		ExposedPorts: map[string]struct{}{"12003/tcp": {}},
	}
	httpdCfg := v1.Config{
		Cmd:          []string{"httpd-foreground"},
		ExposedPorts: map[string]struct{}{"80/tcp": {}},
	}
	var errs []error
	try := func(ref string, f func() (v1.Image, error)) {
		img, err := f()
		errs = append(errs, add(ref, img, err))
	}
	try(e2e+"nginx:1.14-2", func() (v1.Image, error) { return layered(nginxCfg, "nginx") })
	try(cri+"hostnet-nginx-amd64:latest", func() (v1.Image, error) { return layered(hostnetCfg, "hostnet-nginx") })
	try(e2e+"httpd:2.4.39-4", func() (v1.Image, error) { return layered(httpdCfg, "httpd") })
	try(e2e+"nonewprivs:1.3", func() (v1.Image, error) {
		return layered(v1.Config{Cmd: []string{"/usr/local/bin/nnp"}}, "nonewprivs")
	})

	// images/image-user of cri-tools: busybox with USER set.
	for ref, user := range map[string]string{
		"test-image-user-uid":            "1002",
		"test-image-user-username":       "www-data",
		"test-image-user-uid-group":      "1003:1004",
		"test-image-user-username-group": "www-data:1004",
	} {
		try(cri+ref+":latest", func() (v1.Image, error) { return withUser(user) })
	}

	// images/image-predefined-group: default-user (1000) in group 50000.
	try(cri+"test-image-predefined-group:latest", func() (v1.Image, error) {
		passwd, err := os.ReadFile(filepath.Join(dir("busybox"), "etc/passwd"))
		if err != nil {
			return nil, err
		}
		group, err := os.ReadFile(filepath.Join(dir("busybox"), "etc/group"))
		if err != nil {
			return nil, err
		}
		l, err := imagebuild.FilesLayer(
			imagebuild.Entry{Name: "etc/passwd", Content: string(passwd) + "default-user:x:1000:1000:Linux User,,,:/home/default-user:/bin/sh\n"},
			imagebuild.Entry{Name: "etc/group", Content: string(group) + "default-user:x:1000:\ngroup-defined-in-image:x:50000:default-user\n"},
			imagebuild.Entry{Name: "home/default-user", Dir: true, UID: 1000},
		)
		if err != nil {
			return nil, err
		}
		return imagebuild.Image(busybox, v1.Config{Cmd: []string{"sh"}, User: "1000"}, l)
	})

	// images/image-test: busybox plus one empty file named after the image
	// (or the tag), so that each is a different image; test-image-tags:1..3
	// are one image under three tags.
	for _, n := range []string{"test-image-1", "test-image-2", "test-image-3", "test-image-latest", "test-image-digest"} {
		try(cri+n+":latest", func() (v1.Image, error) { return withFile(n) })
	}
	for _, tag := range []string{"test", "all"} {
		try(cri+"test-image-tag:"+tag, func() (v1.Image, error) { return withFile(tag) })
	}
	same, err := withFile("same-image")
	for _, tag := range []string{"1", "2", "3"} {
		errs = append(errs, add(cri+"test-image-tags:"+tag, same, err))
	}
	return out, errors.Join(errs...)
}
