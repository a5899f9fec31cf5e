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
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// epoch is every file's mtime, so that the digests do not change between runs.
var epoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

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
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	var opts []registry.Option
	if !verbose {
		opts = append(opts, registry.Logger(log.New(io.Discard, "", 0)))
	}
	srv := &http.Server{Handler: registry.New(opts...), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	images, err := buildImages(stage)
	if err != nil {
		return err
	}
	host := ln.Addr().String()
	var pushed []string
	refs := make([]string, 0, len(images))
	for ref := range images {
		refs = append(refs, ref)
	}
	sort.Strings(refs)
	for _, ref := range refs {
		img := images[ref]
		r, err := name.ParseReference(host+"/"+ref, name.Insecure)
		if err != nil {
			return err
		}
		if err := remote.Write(r, img); err != nil {
			return fmt.Errorf("push %s: %w", r, err)
		}
		d, err := img.Digest()
		if err != nil {
			return err
		}
		pushed = append(pushed, fmt.Sprintf("%s %s", ref, d))
		log.Printf("pushed %s (%s)", r, d)
	}
	if ready != "" {
		if err := os.WriteFile(ready, []byte(strings.Join(pushed, "\n")+"\n"), 0o644); err != nil {
			return err
		}
	}

	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGTERM, syscall.SIGINT)
	select {
	case err := <-errc:
		return err
	case <-sigc:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// buildImages returns every image critest v1.34 pulls (on Linux), keyed by
// its reference without the registry host (the mirror keeps paths and tags).
func buildImages(stage string) (map[string]v1.Image, error) {
	dir := func(n string) string { return filepath.Join(stage, n) }
	base, err := dirLayer(dir("busybox"))
	if err != nil {
		return nil, err
	}
	busybox, err := image(empty.Image, v1.Config{Cmd: []string{"sh"}}, base)
	if err != nil {
		return nil, err
	}
	layered := func(cfg v1.Config, dirs ...string) (v1.Image, error) {
		layers := []v1.Layer{base}
		for _, d := range dirs {
			l, err := dirLayer(dir(d))
			if err != nil {
				return nil, err
			}
			layers = append(layers, l)
		}
		return image(empty.Image, cfg, layers...)
	}
	withFile := func(file string) (v1.Image, error) {
		l, err := filesLayer(entry{name: file})
		if err != nil {
			return nil, err
		}
		return image(busybox, v1.Config{Cmd: []string{"sh"}}, l)
	}
	withUser := func(user string) (v1.Image, error) {
		return image(busybox, v1.Config{Cmd: []string{"sh"}, User: user})
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
		l, err := filesLayer(
			entry{name: "etc/passwd", content: string(passwd) + "default-user:x:1000:1000:Linux User,,,:/home/default-user:/bin/sh\n"},
			entry{name: "etc/group", content: string(group) + "default-user:x:1000:\ngroup-defined-in-image:x:50000:default-user\n"},
			entry{name: "home/default-user", dir: true, uid: 1000},
		)
		if err != nil {
			return nil, err
		}
		return image(busybox, v1.Config{Cmd: []string{"sh"}, User: "1000"}, l)
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

// image appends layers to base and sets its config (PATH added when unset).
func image(base v1.Image, cfg v1.Config, layers ...v1.Layer) (v1.Image, error) {
	img, err := mutate.AppendLayers(base, layers...)
	if err != nil {
		return nil, err
	}
	if len(cfg.Env) == 0 {
		cfg.Env = []string{"PATH=" + defaultPath}
	}
	img, err = mutate.Config(img, cfg)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", "amd64", v1.Time{Time: epoch}
	return mutate.ConfigFile(img, cf)
}

// dirLayer makes a layer of the tree under root: every entry owned by
// root, modes (setuid included) and symlinks as they are, files that are
// hard links of one another (same inode) stored as tar hard links.
func dirLayer(root string) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	inodes := map[uint64]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = rel
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "root", "root"
		hdr.ModTime, hdr.AccessTime, hdr.ChangeTime = epoch, time.Time{}, time.Time{}
		hdr.Format = tar.FormatPAX
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && fi.Mode().IsRegular() && st.Nlink > 1 {
			if first, seen := inodes[st.Ino]; seen {
				hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
			} else {
				inodes[st.Ino] = rel
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag != tar.TypeReg {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("layer of %s: %w", root, err)
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return bytesLayer(buf.Bytes())
}

// entry is one file or directory of a filesLayer, owned by uid (and gid) uid.
type entry struct {
	name, content string
	dir           bool
	uid           int
}

// filesLayer makes a layer of regular files (mode 0644) and directories
// (0755) in the order given.
func filesLayer(entries ...entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.content)), Typeflag: tar.TypeReg,
			Uid: e.uid, Gid: e.uid, ModTime: epoch, Format: tar.FormatPAX}
		if e.dir {
			hdr.Name, hdr.Mode, hdr.Size, hdr.Typeflag = strings.TrimSuffix(e.name, "/")+"/", 0o755, 0, tar.TypeDir
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := io.WriteString(tw, e.content); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return bytesLayer(buf.Bytes())
}

func bytesLayer(b []byte) (v1.Layer, error) {
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	})
}
