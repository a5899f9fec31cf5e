package main

import (
	"fmt"

	"github.com/docker/go-units"
	"github.com/evjournal/containerd/image"
	"github.com/urfave/cli/v2"
)

// imageFlags bound what one pull may cost (docs/images.md, Bounds); the
// bounds no one should need to change are constants of the image store.
func imageFlags() []cli.Flag {
	d := image.DefaultLimits
	return []cli.Flag{
		&cli.StringFlag{Name: "image-max-size", Value: units.BytesSize(float64(d.MaxImageSize)),
			Usage: "largest uncompressed size of an image pulled for CRI (its layers' tar streams; e.g. 512MiB, 64GiB)"},
		&cli.Int64Flag{Name: "image-max-decompression-ratio", Value: d.MaxDecompressionRatio,
			Usage: "largest ratio of a layer's uncompressed to compressed size (layers under 64 MiB uncompressed are never refused for it)"},
		&cli.DurationFlag{Name: "image-pull-progress-timeout", Value: d.ProgressTimeout,
			Usage: "fail a pull when a registry sends no byte of a request for this long (0: never)"},
		&cli.IntFlag{Name: "max-concurrent-downloads", Value: d.MaxConcurrentDownloads,
			Usage: "layers one pull downloads at once"},
		&cli.StringFlag{Name: "registry-config-path", Usage: "registry hosts dir in containerd's hosts.toml format (e.g. /etc/containerd/certs.d): " +
			"per registry host DIR/HOST/hosts.toml (or DIR/_default/) names its mirrors, their capabilities, CA bundles, client certificates and skip_verify; " +
			"read at each pull; a host configured there ignores --registry-mirror and --insecure-registry"},
	}
}

// imageLimitsFrom reads imageFlags.
func imageLimitsFrom(c *cli.Context) (image.Limits, error) {
	l := image.Limits{
		MaxDecompressionRatio:  c.Int64("image-max-decompression-ratio"),
		ProgressTimeout:        c.Duration("image-pull-progress-timeout"),
		MaxConcurrentDownloads: c.Int("max-concurrent-downloads"),
	}
	size, err := units.RAMInBytes(c.String("image-max-size"))
	switch {
	case err != nil || size <= 0:
		return l, fmt.Errorf("--image-max-size %q: want a size such as 512MiB or 64GiB", c.String("image-max-size"))
	case l.MaxDecompressionRatio < 1:
		return l, fmt.Errorf("--image-max-decompression-ratio %d: want 1 or more", l.MaxDecompressionRatio)
	case l.ProgressTimeout < 0:
		return l, fmt.Errorf("--image-pull-progress-timeout %s: want 0 (never) or more", l.ProgressTimeout)
	case l.MaxConcurrentDownloads < 1:
		return l, fmt.Errorf("--max-concurrent-downloads %d: want 1 or more", l.MaxConcurrentDownloads)
	}
	l.MaxImageSize = size
	if l.ProgressTimeout == 0 {
		l.ProgressTimeout = -1 // the store's "no timeout"
	}
	return l, nil
}
