package image

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/internal/atomicfile"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/klauspost/compress/zstd"
	"github.com/moby/go-archive"
	"golang.org/x/sys/unix"
)

// layerRecord is layers/<chain hex>/layer.json. Layers never change once
// unpacked, so their disk usage is measured once, here, and FsInfo sums it.
type layerRecord struct {
	ChainID string `json:"chainID"`
	DiffID  string `json:"diffID"`
	// Digest is the compressed blob the layer was unpacked from.
	Digest string `json:"digest"`
	// Size is the apparent size of the layer's regular files.
	Size uint64 `json:"size"`
	// DiskBytes and Inodes are what the unpacked layer takes on disk.
	DiskBytes uint64 `json:"diskBytes"`
	Inodes    uint64 `json:"inodes"`
}

// unpackCall is an unpack in progress; done closes when rec or err is set.
type unpackCall struct {
	done chan struct{}
	rec  layerRecord
	err  error
}

func (s *Store) layerDir(chain string) string {
	return filepath.Join(s.layersDir(), strings.TrimPrefix(chain, "sha256:"))
}

// chainIDs computes the OCI chain ids of a layer stack: the first layer's is
// its diff id, each next one is sha256 of "<parent chain id> <diff id>". A
// chain id names a layer together with everything under it, which is what
// an unpacked layer dir with overlay whiteouts depends on.
func chainIDs(diffIDs []string) ([]string, error) {
	out := make([]string, len(diffIDs))
	for i, d := range diffIDs {
		if h, ok := strings.CutPrefix(d, "sha256:"); !ok || len(h) != 64 || !isHex(h) {
			return nil, fmt.Errorf("diff id %q is not a sha256 digest: %w", d, errdefs.ErrInvalidArgument)
		}
		if i == 0 {
			out[i] = d
			continue
		}
		sum := sha256.Sum256([]byte(out[i-1] + " " + d))
		out[i] = "sha256:" + hex.EncodeToString(sum[:])
	}
	return out, nil
}

func (s *Store) loadLayers() error {
	entries, err := os.ReadDir(s.layersDir())
	if err != nil {
		return err
	}
	for _, e := range entries {
		var rec layerRecord
		err := readJSON(filepath.Join(s.layersDir(), e.Name(), "layer.json"), &rec)
		if err == nil && rec.ChainID != "sha256:"+e.Name() {
			err = fmt.Errorf("layer.json names %s", rec.ChainID)
		}
		if err != nil {
			// A layer is a cache of its registry blob: drop what cannot
			// be trusted, a pull brings it back.
			s.log.WithError(err).WithField("layer", e.Name()).Warn("image store: dropping an unreadable layer")
			if p, rerr := s.retire(filepath.Join(s.layersDir(), e.Name())); rerr == nil {
				removeAll(s.log, []string{p})
			}
			continue
		}
		s.layers[rec.ChainID] = rec
	}
	return nil
}

// ensureLayer returns the record of layer chain, unpacking l if the store
// lacks it. Concurrent pulls of the same layer share one unpack.
func (s *Store) ensureLayer(ctx context.Context, l v1.Layer, chain, diffID string) (layerRecord, error) {
	for {
		s.mu.Lock()
		if rec, ok := s.layers[chain]; ok {
			s.mu.Unlock()
			return rec, nil
		}
		if c := s.unpacking[chain]; c != nil {
			s.mu.Unlock()
			select {
			case <-c.done:
				// Its success is in s.layers; after its failure this
				// pull tries on its own.
				continue
			case <-ctx.Done():
				return layerRecord{}, ctx.Err()
			}
		}
		c := &unpackCall{done: make(chan struct{})}
		s.unpacking[chain] = c
		s.mu.Unlock()

		c.rec, c.err = s.unpackLayer(l, chain, diffID)
		s.mu.Lock()
		delete(s.unpacking, chain)
		if c.err == nil {
			s.layers[chain] = c.rec
		}
		s.mu.Unlock()
		close(c.done)
		return c.rec, c.err
	}
}

// unpackLayer downloads l into a temp dir, verifies it, unpacks it beside
// and renames the whole into layers/: the layer appears complete or not at
// all. The pull's context reaches the download through the remote image.
func (s *Store) unpackLayer(l v1.Layer, chain, diffID string) (rec layerRecord, err error) {
	digest, err := l.Digest()
	if err != nil {
		return rec, classify(err)
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("layer %s: %w", digest, err)
		}
	}()
	size, err := l.Size()
	if err != nil {
		return rec, classify(err)
	}
	tmp, err := os.MkdirTemp(s.tmpDir(), "unpack-")
	if err != nil {
		return rec, err
	}
	renamed := false
	defer func() {
		if !renamed {
			os.RemoveAll(tmp)
		}
	}()
	blob := filepath.Join(tmp, "blob")
	if err := download(l, digest, size, blob); err != nil {
		return rec, err
	}
	fs := filepath.Join(tmp, "fs")
	if err := os.Mkdir(fs, 0o755); err != nil {
		return rec, err
	}
	if err := unpackBlob(blob, fs, diffID); err != nil {
		return rec, err
	}
	if err := os.Remove(blob); err != nil {
		return rec, err
	}
	rec = layerRecord{ChainID: chain, DiffID: diffID, Digest: digest.String()}
	if err := measure(fs, &rec); err != nil {
		return rec, err
	}
	if err := writeJSON(filepath.Join(tmp, "layer.json"), rec); err != nil {
		return rec, err
	}
	if err := syncFS(tmp); err != nil {
		return rec, err
	}
	if err := os.Rename(tmp, s.layerDir(chain)); err != nil {
		return rec, err
	}
	renamed = true
	s.log.WithField("layer", chain).WithField("digest", digest).Debug("image store: layer unpacked")
	return rec, atomicfile.SyncDir(s.layersDir())
}

// download copies the compressed blob of l into path, checking its size
// and digest against the manifest's. go-containerregistry verifies the
// digest too, but only at the end of the stream and with an error of an
// internal type; checking here gives the error its class (ErrDataLoss) and
// keeps the unpacker from ever reading unverified bytes.
func download(l v1.Layer, digest v1.Hash, size int64, path string) error {
	if digest.Algorithm != "sha256" {
		return fmt.Errorf("digest algorithm %q: %w", digest.Algorithm, errdefs.ErrNotImplemented)
	}
	rc, err := l.Compressed()
	if err != nil {
		return classify(err)
	}
	defer rc.Close()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	// One byte past the declared size tells a registry that sends more.
	n, cerr := io.Copy(io.MultiWriter(f, h), io.LimitReader(rc, size+1))
	got := "sha256:" + hex.EncodeToString(h.Sum(nil))
	switch {
	case n > size:
		return fmt.Errorf("the registry sent more than the %d bytes the manifest declares: %w", size, errdefs.ErrDataLoss)
	case n == size && got != digest.String():
		return fmt.Errorf("content does not match its digest: got %s, want %s (%d bytes): %w", got, digest, n, errdefs.ErrDataLoss)
	case cerr != nil:
		return fmt.Errorf("download after %d of %d bytes: %w", n, size, classify(cerr))
	case n < size:
		return fmt.Errorf("the registry sent %d of the %d bytes the manifest declares: %w", n, size, errdefs.ErrUnavailable)
	}
	return nil
}

// unpackBlob unpacks the verified blob into dir with overlay whiteouts
// (character devices 0/0 and the opaque xattr), ownership and xattrs as the
// tar says, and checks the uncompressed stream against the diff id.
//
// archive.Unpack is used rather than archive.ApplyLayer: ApplyLayer applies
// whiteouts by deleting from dest (a layer applied onto its parent's files),
// and it sets the umask of the whole process to 0 while it runs, which
// would race with every other file the daemon creates.
func unpackBlob(blob, dir, diffID string) error {
	f, err := os.Open(blob)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := decompress(f)
	if err != nil {
		return fmt.Errorf("decompress: %w: %w", errdefs.ErrInvalidArgument, err)
	}
	defer r.Close()
	h := sha256.New()
	tee := io.TeeReader(r, h)
	if err := archive.Unpack(tee, dir, &archive.TarOptions{WhiteoutFormat: archive.OverlayWhiteoutFormat}); err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	// The tar's end blocks and any padding are part of the diff id.
	if _, err := io.Copy(io.Discard, tee); err != nil {
		return fmt.Errorf("decompress: %w: %w", errdefs.ErrInvalidArgument, err)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != diffID {
		return fmt.Errorf("uncompressed content is %s, the config's diff id is %s: %w", got, diffID, errdefs.ErrDataLoss)
	}
	return nil
}

var (
	gzipMagic = []byte{0x1f, 0x8b}
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// decompress recognizes gzip and zstd by their magic bytes (media types are
// not reliable across registries); anything else is read as a plain tar.
func decompress(r io.Reader) (io.ReadCloser, error) {
	br := bufio.NewReader(r)
	head, _ := br.Peek(4)
	switch {
	case bytes.HasPrefix(head, gzipMagic):
		return gzip.NewReader(br)
	case bytes.HasPrefix(head, zstdMagic):
		d, err := zstd.NewReader(br)
		if err != nil {
			return nil, err
		}
		return d.IOReadCloser(), nil
	}
	return io.NopCloser(br), nil
}

// measure fills rec's sizes from the files under dir; hard links count once.
func measure(dir string, rec *layerRecord) error {
	seen := map[uint64]bool{}
	return filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil {
			return &os.PathError{Op: "lstat", Path: path, Err: err}
		}
		if seen[st.Ino] {
			return nil
		}
		seen[st.Ino] = true
		rec.Inodes++
		rec.DiskBytes += uint64(st.Blocks) * 512
		if st.Mode&unix.S_IFMT == unix.S_IFREG {
			rec.Size += uint64(st.Size)
		}
		return nil
	})
}

// syncFS flushes the filesystem holding dir, so that a layer renamed into
// place after it has its content on disk too, not only its name.
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return &os.PathError{Op: "syncfs", Path: dir, Err: err}
	}
	return nil
}
