package image

import (
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/containerd/errdefs"
)

// Fixed bounds on what a registry can make a pull read. Each is checked
// against the size a registry or a manifest declares before anything is read,
// and again while reading (declared sizes can lie).
const (
	// MaxManifestSize bounds a manifest or an index: the 4 MiB the OCI
	// distribution spec suggests registries accept and clients expect.
	MaxManifestSize = 4 << 20
	// MaxConfigSize bounds an image config. A config grows with the
	// layers (a diff id and a history entry each): MaxLayers of them take
	// well under 100 KiB; containers/image (CRI-O) uses the same 4 MiB.
	MaxConfigSize = 4 << 20
	// MaxIndexDepth bounds the indexes followed above an image manifest:
	// one is the usual multi-platform image, a second one nests rarely.
	MaxIndexDepth = 4
	// MaxLayers bounds the layers of an image. Docker refuses images of
	// more than 125 layers, so no image it built is refused here; a rootfs
	// of this store can stack fewer still (docs/images.md, Rootfs).
	MaxLayers = 128
	// MaxZstdWindow bounds the window a zstd layer may ask of the decoder,
	// which allocates it whole at the frame's start: up to `zstd --ultra
	// -20` (32 MiB); the decoder's own default would be 512 MiB.
	MaxZstdWindow = 32 << 20
	// RatioFloor is what any layer may decompress to whatever its ratio:
	// small layers of text or sparse files compress far beyond any ratio
	// that would still stop a bomb.
	RatioFloor = 64 << 20
)

// Limits are the bounds of a pull the daemon's flags set. A zero field takes
// its value from DefaultLimits.
type Limits struct {
	// MaxImageSize bounds the uncompressed size of an image: the sum of
	// its layers' tar streams (--image-max-size).
	MaxImageSize int64
	// MaxDecompressionRatio bounds a layer's uncompressed size to this
	// many times its compressed size, or RatioFloor if more
	// (--image-max-decompression-ratio).
	MaxDecompressionRatio int64
	// ProgressTimeout fails a pull when a registry sends no byte for
	// this long on any of its requests (--image-pull-progress-timeout);
	// negative: no timeout.
	ProgressTimeout time.Duration
	// MaxConcurrentDownloads bounds the layers one pull downloads at
	// once (--max-concurrent-downloads).
	MaxConcurrentDownloads int
}

// DefaultLimits are the bounds of a Store opened with zero Limits.
var DefaultLimits = Limits{
	MaxImageSize:           32 << 30,
	MaxDecompressionRatio:  100,
	ProgressTimeout:        time.Minute,
	MaxConcurrentDownloads: 3,
}

func (l Limits) withDefaults() Limits {
	if l.MaxImageSize <= 0 {
		l.MaxImageSize = DefaultLimits.MaxImageSize
	}
	if l.MaxDecompressionRatio <= 0 {
		l.MaxDecompressionRatio = DefaultLimits.MaxDecompressionRatio
	}
	if l.ProgressTimeout == 0 {
		l.ProgressTimeout = DefaultLimits.ProgressTimeout
	}
	if l.MaxConcurrentDownloads <= 0 {
		l.MaxConcurrentDownloads = DefaultLimits.MaxConcurrentDownloads
	}
	return l
}

// layerBound is the most a layer of compressed bytes may decompress to.
func (l Limits) layerBound(compressed int64) int64 {
	if compressed > 0 && l.MaxDecompressionRatio > math.MaxInt64/compressed {
		return math.MaxInt64
	}
	return max(RatioFloor, compressed*l.MaxDecompressionRatio)
}

// maxConcurrentUnpacks bounds the layers the whole daemon decompresses at
// once, whatever the number of pulls: a decoder's memory (MaxZstdWindow) is
// the largest cost of a pull, and more unpacks than CPUs only contend.
func maxConcurrentUnpacks() int { return min(4, max(1, runtime.GOMAXPROCS(0))) }

// overBound is the error of a size over a bound: invalid content, naming
// what was measured and the bound. A negative size is one not known but
// found over the bound while reading.
func overBound(what string, size int64, bound string, limit int64) error {
	if size < 0 {
		return fmt.Errorf("%s: over the %s of %d bytes: %w", what, bound, limit, errdefs.ErrInvalidArgument)
	}
	return fmt.Errorf("%s: %d bytes, over the %s of %d bytes: %w", what, size, bound, limit, errdefs.ErrInvalidArgument)
}

// budget is what is left of an image's size bound while its layers unpack
// in parallel: each takes its bytes as it reads them.
type budget struct {
	left  atomic.Int64
	limit int64
}

func newBudget(limit int64) *budget {
	b := &budget{limit: limit}
	b.left.Store(limit)
	return b
}

// take spends n bytes; false once the image is over its bound.
func (b *budget) take(n int64) bool { return b.left.Add(-n) >= 0 }
