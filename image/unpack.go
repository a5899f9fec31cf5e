package image

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/internal/errmark"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/klauspost/compress/zstd"
	"github.com/moby/go-archive"
)

// download copies the compressed blob d into path, checking its size and
// digest against the manifest's: a mismatch is ErrDataLoss, and the
// unpacker never reads unverified bytes. A failed write is the node's
// (ErrResourceExhausted on a full disk), a failed read the registry's.
func download(ctx context.Context, reg *registry, d v1.Descriptor, path string) error {
	body, err := reg.blob(ctx, d)
	if err != nil {
		return err
	}
	defer body.Close()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	h := sha256.New()
	// One byte past the declared size tells a registry that sends more.
	n, rerr, werr := copyBlob(f, h, io.LimitReader(body, d.Size+1))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	got := "sha256:" + hex.EncodeToString(h.Sum(nil))
	switch {
	case werr != nil:
		return diskClass(werr)
	case n > d.Size:
		return fmt.Errorf("the registry sent more than the %d bytes the manifest declares: %w", d.Size, errdefs.ErrDataLoss)
	case n == d.Size && got != d.Digest.String():
		return fmt.Errorf("content does not match its digest: got %s, want %s (%d bytes): %w", got, d.Digest, n, errdefs.ErrDataLoss)
	case rerr != nil:
		return fmt.Errorf("download after %d of %d bytes: %w", n, d.Size, classify(rerr))
	case n < d.Size:
		return fmt.Errorf("the registry sent %d of the %d bytes the manifest declares: %w", n, d.Size, errdefs.ErrUnavailable)
	}
	return nil
}

// copyBlob copies src to f and h, telling a failed read from a failed write.
func copyBlob(f io.Writer, h io.Writer, src io.Reader) (n int64, readErr, writeErr error) {
	buf := make([]byte, 32<<10)
	for {
		m, err := src.Read(buf)
		if m > 0 {
			if _, werr := f.Write(buf[:m]); werr != nil {
				return n, nil, werr
			}
			h.Write(buf[:m])
			n += int64(m)
		}
		if err == io.EOF {
			return n, nil, nil
		}
		if err != nil {
			return n, err, nil
		}
	}
}

// unpackBlob unpacks the verified blob into dir with overlay whiteouts
// (character devices 0/0 and the opaque xattr), ownership and xattrs as the
// tar says, checks the uncompressed stream against the diff id and returns
// its size. The stream is bounded (boundedReader): the unpack stops at the
// pull's cancel and at the ratio and image size bounds.
//
// archive.Unpack is used rather than archive.ApplyLayer: ApplyLayer applies
// whiteouts by deleting from dest (a layer applied onto its parent's files),
// and it sets the umask of the whole process to 0 while it runs, which
// would race with every other file the daemon creates.
func unpackBlob(ctx context.Context, blob, dir string, j layerJob, lim Limits) (int64, error) {
	f, err := os.Open(blob)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r, err := decompress(f)
	if err != nil {
		return 0, fmt.Errorf("decompress: %w: %w", errdefs.ErrInvalidArgument, err)
	}
	defer r.Close()
	br := newBoundedReader(ctx, r, j, lim)
	h := sha256.New()
	tee := io.TeeReader(br, h)
	err = archive.Unpack(tee, dir, &archive.TarOptions{WhiteoutFormat: archive.OverlayWhiteoutFormat})
	if err == nil {
		// The tar's end blocks and any padding are part of the diff id.
		_, err = io.Copy(io.Discard, tee)
	}
	if err != nil {
		return br.n, br.explain(err)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != j.diffID {
		return br.n, fmt.Errorf("uncompressed content is %s, the config's diff id is %s: %w", got, j.diffID, errdefs.ErrDataLoss)
	}
	return br.n, nil
}

// boundedReader is a layer's uncompressed stream as the unpacker reads it.
// It ends at the pull's cancel, at the layer's ratio bound and at the
// image's size bound, and keeps the first reason: the unpacker may wrap an
// error of its reader beyond recognition.
type boundedReader struct {
	ctx    context.Context
	r      io.Reader
	n      int64  // read so far
	bound  int64  // the ratio bound
	ratio  string // how the bound was reached, for its error
	budget *budget
	err    error
}

func newBoundedReader(ctx context.Context, r io.Reader, j layerJob, lim Limits) *boundedReader {
	return &boundedReader{ctx: ctx, r: r, bound: lim.layerBound(j.desc.Size), budget: j.budget,
		ratio: fmt.Sprintf("decompression ratio bound (%d times the %d compressed bytes, at least %d)", lim.MaxDecompressionRatio, j.desc.Size, RatioFloor)}
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if err := b.ctx.Err(); err != nil {
		b.err = err
		return 0, err
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	switch {
	case b.n > b.bound:
		b.err = overBound("uncompressed content", -1, b.ratio, b.bound)
	case !b.budget.take(int64(n)):
		b.err = overBound("the image's layers", -1, "image size bound", b.budget.limit)
	case errors.Is(err, zstd.ErrWindowSizeExceeded):
		b.err = fmt.Errorf("decompress: the zstd window is over the %d-byte window bound: %w", MaxZstdWindow, errdefs.ErrInvalidArgument)
	case err != nil && err != io.EOF:
		b.err = fmt.Errorf("decompress: %w: %w", errdefs.ErrInvalidArgument, err)
	}
	if b.err != nil {
		return 0, b.err
	}
	return n, err
}

// explain is the error of an unpack that failed: the reader's own reason
// if it stopped the unpack, else the unpacker's, classified.
func (b *boundedReader) explain(err error) error {
	if b.err != nil {
		return b.err
	}
	return unpackClass(err)
}

// nodeErrnos are the unpack failures that are the node's, not the layer's.
// (EPERM is not among them: a root daemon meets it for a hard link to a
// directory.)
var nodeErrnos = []error{syscall.EIO, syscall.EROFS, syscall.ENOMEM, syscall.EMFILE, syscall.ENFILE,
	syscall.ENOTSUP, syscall.EACCES}

// unpackClass classifies an unpack's failure: a full disk is
// ErrResourceExhausted, an I/O error or a refusal of the node's file system
// stays unclassified (Internal), and anything else is the layer's doing (a
// malformed tar, a path out of the layer, a file over a directory, a link to
// nothing): ErrInvalidArgument.
func unpackClass(err error) error {
	if err = diskClass(err); errdefs.Resolve(err) != errdefs.ErrUnknown {
		return err
	}
	for _, e := range nodeErrnos {
		if errors.Is(err, e) {
			return fmt.Errorf("unpack: %w", err)
		}
	}
	return fmt.Errorf("unpack: the layer is malformed: %w: %w", errdefs.ErrInvalidArgument, err)
}

// diskClass classifies a full disk or quota: ErrResourceExhausted, as the
// CRI runtime service does.
func diskClass(err error) error {
	if errdefs.Resolve(err) == errdefs.ErrUnknown && (errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)) {
		return errmark.Mark(err, errdefs.ErrResourceExhausted)
	}
	return err
}

var (
	gzipMagic = []byte{0x1f, 0x8b}
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// decompress recognizes gzip and zstd by their magic bytes (media types are
// not reliable across registries); anything else is read as a plain tar.
// The zstd decoder runs in the reader's goroutine (so a cancel between two
// reads stops it) with its window bounded (MaxZstdWindow).
func decompress(r io.Reader) (io.ReadCloser, error) {
	br := bufio.NewReader(r)
	head, _ := br.Peek(4)
	switch {
	case bytes.HasPrefix(head, gzipMagic):
		return gzip.NewReader(br)
	case bytes.HasPrefix(head, zstdMagic):
		d, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(MaxZstdWindow), zstd.WithDecoderLowmem(true))
		if err != nil {
			return nil, err
		}
		return d.IOReadCloser(), nil
	}
	return io.NopCloser(br), nil
}
