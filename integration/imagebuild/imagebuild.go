// Package imagebuild makes OCI images from directory trees and files, with
// stable digests, and serves them from an in-memory registry
// (go-containerregistry's pkg/registry). The offline conformance runs
// (integration/critest, integration/node-conformance) rebuild the images
// their suites pull from Debian binaries and Go programs with it, and the
// daemon under test reaches the registry as a mirror (or by name).
package imagebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
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
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Epoch is every file's mtime and every image's creation time, so that the
// digests do not change between runs.
var Epoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// DefaultPath is the PATH an image gets when its config sets no Env.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Image appends layers to base and sets its config (PATH added when Env is
// unset), linux/amd64, created at Epoch.
func Image(base v1.Image, cfg v1.Config, layers ...v1.Layer) (v1.Image, error) {
	img, err := mutate.AppendLayers(base, layers...)
	if err != nil {
		return nil, err
	}
	if len(cfg.Env) == 0 {
		cfg.Env = []string{"PATH=" + DefaultPath}
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
	cf.OS, cf.Architecture, cf.Created = "linux", "amd64", v1.Time{Time: Epoch}
	return mutate.ConfigFile(img, cf)
}

// DirLayer makes a layer of the tree under root: every entry owned by
// root, modes (setuid included) and symlinks as they are, files that are
// hard links of one another (same inode) stored as tar hard links.
func DirLayer(root string) (v1.Layer, error) {
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
		hdr.ModTime, hdr.AccessTime, hdr.ChangeTime = Epoch, time.Time{}, time.Time{}
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

// Entry is one file or directory of a FilesLayer, owned by uid (and gid)
// UID; Mode 0 means 0644 for a file, 0755 for a directory.
type Entry struct {
	Name, Content string
	Dir           bool
	UID           int
	Mode          int64
}

// FilesLayer makes a layer of regular files and directories in the order
// given.
func FilesLayer(entries ...Entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.Name, Mode: 0o644, Size: int64(len(e.Content)), Typeflag: tar.TypeReg,
			Uid: e.UID, Gid: e.UID, ModTime: Epoch, Format: tar.FormatPAX}
		if e.Dir {
			hdr.Name, hdr.Mode, hdr.Size, hdr.Typeflag = strings.TrimSuffix(e.Name, "/")+"/", 0o755, 0, tar.TypeDir
		}
		if e.Mode != 0 {
			hdr.Mode = e.Mode
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := io.WriteString(tw, e.Content); err != nil {
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

// Serve serves an in-memory registry on addr, pushes images into it (each
// keyed by its reference without the registry host: "e2e-test-images/
// busybox:1.29-2"), writes the list of what it pushed (reference and
// digest, one a line) to ready once every image is in (when ready is not
// empty), then serves until SIGTERM or SIGINT. build is called once the
// registry listens, so that a caller sees a bound address early.
func Serve(addr, ready string, verbose bool, build func() (map[string]v1.Image, error)) error {
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

	images, err := build()
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
