package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/internal/atomicfile"
	v1 "github.com/google/go-containerregistry/pkg/v1"
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
	// Uncompressed is the size of the layer's tar stream, what the image
	// size bound counts; absent from records older than the bound.
	Uncompressed int64 `json:"uncompressed,omitempty"`
	// DiskBytes and Inodes are what the unpacked layer takes on disk.
	DiskBytes uint64 `json:"diskBytes"`
	Inodes    uint64 `json:"inodes"`
}

// uncompressed is what the layer counts against an image's size bound.
func (r layerRecord) uncompressed() int64 {
	if r.Uncompressed > 0 {
		return r.Uncompressed
	}
	return int64(r.Size)
}

// unpackCall is an unpack in progress; done closes when rec or err is set.
type unpackCall struct {
	done chan struct{}
	rec  layerRecord
	err  error
}

// layerJob is one layer of a pull.
type layerJob struct {
	desc   v1.Descriptor // the compressed blob, as the manifest declares it
	chain  string
	diffID string
	budget *budget // what is left of the image's size bound
}

// spend counts a layer the store already has against the image's bound.
func (j layerJob) spend(rec layerRecord) error {
	if !j.budget.take(rec.uncompressed()) {
		return fmt.Errorf("layer %s: %w", j.desc.Digest, overBound("the image's layers", -1, "image size bound", j.budget.limit))
	}
	return nil
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

// dropIncomplete removes the images that lost a layer (its record was
// unreadable and the layer dropped): reported present, such an image could
// never run a container and kubelet would never pull it again. A pull
// brings it back.
func (s *Store) dropIncomplete() {
	for id, img := range s.images {
		i := slices.IndexFunc(img.Layers, func(l string) bool { _, ok := s.layers[l]; return !ok })
		if i < 0 {
			continue
		}
		log := s.log.WithField("image", id).WithField("layer", img.Layers[i])
		log.Warn("image store: an image lost a layer: removed, a pull brings it back")
		if err := s.deleteRecordLocked(img); err != nil {
			log.WithError(err).Warn("image store: cannot remove the record of an image that lost a layer; it is ignored until the next start")
			s.forgetLocked(img)
		}
	}
}

// ensureLayer returns the record of layer j.chain, unpacking it if the
// store lacks it. Concurrent pulls of the same layer share one unpack.
func (s *Store) ensureLayer(ctx context.Context, reg *registry, j layerJob) (layerRecord, error) {
	for {
		if err := ctx.Err(); err != nil {
			return layerRecord{}, err
		}
		s.mu.Lock()
		rec, present := s.layers[j.chain]
		c := s.unpacking[j.chain]
		if !present && c == nil {
			c = &unpackCall{done: make(chan struct{})}
			s.unpacking[j.chain] = c
			s.mu.Unlock()
			return s.runUnpack(ctx, reg, j, c)
		}
		s.mu.Unlock()
		if present {
			return rec, j.spend(rec)
		}
		select {
		case <-c.done:
			// Its success is in s.layers; after its failure this
			// pull tries on its own.
		case <-ctx.Done():
			return layerRecord{}, ctx.Err()
		}
	}
}

// runUnpack is the unpack c stands for, shared with the pulls that wait.
func (s *Store) runUnpack(ctx context.Context, reg *registry, j layerJob, c *unpackCall) (layerRecord, error) {
	c.rec, c.err = s.unpackLayer(ctx, reg, j)
	s.mu.Lock()
	delete(s.unpacking, j.chain)
	if c.err == nil {
		s.layers[j.chain] = c.rec
	}
	s.mu.Unlock()
	close(c.done)
	return c.rec, c.err
}

// unpackLayer downloads the layer into a temp dir, verifies it, unpacks it
// beside and renames the whole into layers/: the layer appears complete or
// not at all.
func (s *Store) unpackLayer(ctx context.Context, reg *registry, j layerJob) (rec layerRecord, err error) {
	tmp, err := os.MkdirTemp(s.tmpDir(), "unpack-")
	if err != nil {
		return rec, fmt.Errorf("layer %s: %w", j.desc.Digest, err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
			err = fmt.Errorf("layer %s: %w", j.desc.Digest, err)
		}
	}()
	blob := filepath.Join(tmp, "blob")
	if err := download(ctx, reg, j.desc, blob); err != nil {
		return rec, err
	}
	fs := filepath.Join(tmp, "fs")
	if err := os.Mkdir(fs, 0o755); err != nil {
		return rec, err
	}
	rec = layerRecord{ChainID: j.chain, DiffID: j.diffID, Digest: j.desc.Digest.String()}
	if rec.Uncompressed, err = s.unpack(ctx, blob, fs, j); err != nil {
		return rec, err
	}
	if err := os.Remove(blob); err != nil {
		return rec, err
	}
	return rec, s.commitLayer(tmp, &rec)
}

// unpack runs unpackBlob when one of the daemon's unpack slots is free.
func (s *Store) unpack(ctx context.Context, blob, fs string, j layerJob) (int64, error) {
	select {
	case s.unpackSlots <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	defer func() { <-s.unpackSlots }()
	return unpackBlob(ctx, blob, fs, j, s.limits)
}

// commitLayer measures the unpacked layer in tmp, records it and renames
// it into layers/.
func (s *Store) commitLayer(tmp string, rec *layerRecord) error {
	if err := measure(filepath.Join(tmp, "fs"), rec); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(tmp, "layer.json"), rec); err != nil {
		return err
	}
	if err := syncFS(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, s.layerDir(rec.ChainID)); err != nil {
		return err
	}
	s.log.WithField("layer", rec.ChainID).WithField("digest", rec.Digest).Debug("image store: layer unpacked")
	return atomicfile.SyncDir(s.layersDir())
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
