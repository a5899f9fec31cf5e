// Command registry serves an OCI registry (go-containerregistry's
// pkg/registry, in memory, through integration/imagebuild) holding the
// images Kubernetes' node e2e suite pulls, rebuilt offline: the suite's own
// Go programs (agnhost, nonewprivs) built from the Go module proxy, Debian's
// busybox-static, the repository's pause, and a minimal Debian root
// filesystem for nginx and glibc's hostname, all staged in directories by
// integration/node-conformance/run.sh. Each is pushed under its original path
// and tag (test/utils/image/manifest.go of the suite's Kubernetes version):
// registry.k8s.io/e2e-test-images/busybox:1.37.0-2 is pushed as
// HOST/e2e-test-images/busybox:1.37.0-2, and the suite's registry override
// (KUBE_TEST_REPO_LIST) and the daemon's --registry-mirror point there.
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
	addr := flag.String("addr", "127.0.0.1:0", "address to serve the registry on")
	stage := flag.String("stage", "", "directory staged by run.sh: busybox/, agnhost/, nonewprivs/, pause/, debian/ (root filesystem trees)")
	ready := flag.String("ready", "", "file written with the pushed references once all are pushed")
	verbose := flag.Bool("v", false, "log every registry request")
	flag.Parse()
	if *stage == "" {
		log.Fatal("-stage is required")
	}
	err := imagebuild.Serve(*addr, *ready, *verbose, func() (map[string]v1.Image, error) { return buildImages(*stage) })
	if err != nil {
		log.Fatal(err)
	}
}

// The users and groups of the busybox image (and of nonroot, agnhost).
const (
	passwd = `root:x:0:0:root:/root:/bin/sh
daemon:x:1:1:daemon:/usr/sbin:/bin/false
bin:x:2:2:bin:/bin:/bin/false
sys:x:3:3:sys:/dev:/bin/false
sync:x:4:100:sync:/bin:/bin/sync
mail:x:8:8:mail:/var/spool/mail:/bin/false
www-data:x:33:33:www-data:/var/www:/bin/false
operator:x:37:37:Operator:/var:/bin/false
nobody:x:65534:65534:nobody:/home:/bin/false
`
	group = `root:x:0:
daemon:x:1:
bin:x:2:
sys:x:3:
adm:x:4:
tty:x:5:
disk:x:6:
wheel:x:10:root
mail:x:8:
www-data:x:33:
operator:x:37:
staff:x:50:
users:x:100:
nogroup:x:65534:
`
)

// buildImages returns every image the node e2e suite of Kubernetes v1.37
// pulls in its [NodeConformance] specs, keyed by reference without the host.
func buildImages(stage string) (map[string]v1.Image, error) {
	dir := func(n string) string { return filepath.Join(stage, n) }
	layer := func(n string) (v1.Layer, error) { return imagebuild.DirLayer(dir(n)) }
	out := map[string]v1.Image{}
	var errs []error
	try := func(ref string, f func() (v1.Image, error)) {
		img, err := f()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ref, err))
			return
		}
		out[ref] = img
	}

	bb, err := layer("busybox")
	if err != nil {
		return nil, err
	}
	users, err := imagebuild.FilesLayer(
		imagebuild.Entry{Name: "etc/passwd", Content: passwd},
		imagebuild.Entry{Name: "etc/group", Content: group},
	)
	if err != nil {
		return nil, err
	}
	busybox, err := imagebuild.Image(empty.Image, v1.Config{Cmd: []string{"sh"}}, bb, users)
	if err != nil {
		return nil, err
	}
	const e2e = "e2e-test-images/"
	out[e2e+"busybox:1.37.0-2"] = busybox
	// Older tags some specs name directly.
	out[e2e+"busybox:1.36.1-1"] = busybox
	out[e2e+"busybox:1.29-2"] = busybox

	// nonroot: the busybox image run as 1234 (the original is debian-base
	// with USER 1234; the specs only run id and sh as that user).
	try(e2e+"nonroot:1.5", func() (v1.Image, error) {
		return imagebuild.Image(busybox, v1.Config{Cmd: []string{"sh"}, User: "1234"})
	})

	// agnhost: busybox + /agnhost (its Go program), /agnhost-2 a link to it
	// (the entrypoint specs), /uploads (netexec), user 1000 in group 50000
	// (the SupplementalGroups specs). AgnhostPrev is the same program with
	// a file of its version, so that the two are distinct images.
	agnhost := func(version string) (v1.Image, error) {
		a, err := layer("agnhost")
		if err != nil {
			return nil, err
		}
		u, err := imagebuild.FilesLayer(
			imagebuild.Entry{Name: "etc/passwd", Content: passwd + "user-defined-in-image:x:1000:1000:Linux User,,,:/home/user-defined-in-image:/bin/sh\n"},
			imagebuild.Entry{Name: "etc/group", Content: group + "user-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n"},
			imagebuild.Entry{Name: "home/user-defined-in-image", Dir: true, UID: 1000},
			imagebuild.Entry{Name: "AGNHOST_VERSION", Content: version + "\n"},
		)
		if err != nil {
			return nil, err
		}
		return imagebuild.Image(empty.Image, v1.Config{
			Entrypoint:   []string{"/agnhost"},
			Cmd:          []string{"pause"},
			ExposedPorts: map[string]struct{}{"80/tcp": {}, "8080/tcp": {}, "8081/tcp": {}, "9376/tcp": {}, "5000/tcp": {}},
		}, bb, a, u)
	}
	try(e2e+"agnhost:2.66.1", func() (v1.Image, error) { return agnhost("2.66.1") })
	try(e2e+"agnhost:2.55", func() (v1.Image, error) { return agnhost("2.55") })

	try(e2e+"nonewprivs:1.4", func() (v1.Image, error) {
		l, err := layer("nonewprivs")
		if err != nil {
			return nil, err
		}
		return imagebuild.Image(busybox, v1.Config{Cmd: []string{"nnp"}}, l)
	})

	// pause: the repository's pause as /pause, run as 65535 as the
	// original image is.
	try("pause:3.10.2", func() (v1.Image, error) {
		l, err := layer("pause")
		if err != nil {
			return nil, err
		}
		return imagebuild.Image(empty.Image, v1.Config{Entrypoint: []string{"/pause"}, User: "65535:65535"}, l)
	})

	// The Debian root filesystem (glibc, nginx, glibc's hostname, sh from
	// busybox-static) is the base of nginx (both tags) and of
	// glibc-dns-testing, whose specs run glibc's `hostname -f`.
	deb, err := layer("debian")
	if err != nil {
		return nil, err
	}
	// The two nginx tags differ by a file naming the tag: distinct images.
	nginx := func(tag string) func() (v1.Image, error) {
		return func() (v1.Image, error) {
			l, err := imagebuild.FilesLayer(imagebuild.Entry{Name: "NGINX_IMAGE_TAG", Content: tag + "\n"})
			if err != nil {
				return nil, err
			}
			return imagebuild.Image(empty.Image, v1.Config{
				Cmd:          []string{"nginx", "-g", "daemon off;"},
				ExposedPorts: map[string]struct{}{"80/tcp": {}},
				StopSignal:   "SIGQUIT",
			}, deb, l)
		}
	}
	try(e2e+"nginx:1.27.0-2", nginx("1.27.0-2"))
	try(e2e+"nginx:1.28.0-2", nginx("1.28.0-2"))
	try(e2e+"glibc-dns-testing:2.1.1", func() (v1.Image, error) {
		return imagebuild.Image(empty.Image, v1.Config{Cmd: []string{"sh"}}, deb)
	})

	if _, err := os.Stat(dir("busybox")); err != nil {
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}
