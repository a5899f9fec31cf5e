package image

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"

	"github.com/containerd/errdefs"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// resolved is what a pull learnt from the manifests, before any layer.
type resolved struct {
	// digest is the manifest's the reference names (an index's, if so).
	digest v1.Hash
	// id is the config's digest, the image ID.
	id     v1.Hash
	config ocispec.Image
	layers []v1.Descriptor
}

// anyManifest holds the fields that tell an image manifest from an index.
type anyManifest struct {
	SchemaVersion int64           `json:"schemaVersion"`
	MediaType     types.MediaType `json:"mediaType"`
	Config        *blobRef        `json:"config"`
	Layers        []blobRef       `json:"layers"`
	Manifests     []blobRef       `json:"manifests"`
}

// blobRef is a descriptor as far as a pull reads it. Annotations, URLs and
// embedded data are skipped: a map parsed from JSON takes several times its
// text, and a manifest may be 4 MiB of them.
type blobRef struct {
	MediaType types.MediaType `json:"mediaType"`
	Size      int64           `json:"size"`
	Digest    v1.Hash         `json:"digest"`
	Platform  *v1.Platform    `json:"platform"`
}

func (b blobRef) desc() v1.Descriptor {
	return v1.Descriptor{MediaType: b.MediaType, Size: b.Size, Digest: b.Digest}
}

// resolve reads what the endpoint's reference names, follows indexes down
// to this platform's image manifest (at most MaxIndexDepth of them), and
// reads and checks the image's config.
func (r *registry) resolve(ctx context.Context) (*resolved, error) {
	ident := r.ep.ref.Identifier()
	raw, mt, err := r.manifest(ctx, ident)
	if err != nil {
		return nil, err
	}
	res := &resolved{digest: sha256Of(raw)}
	if d, ok := r.ep.ref.(name.Digest); ok && d.DigestStr() != res.digest.String() {
		return nil, fmt.Errorf("manifest %s: the registry sent content of digest %s: %w", ident, res.digest, errdefs.ErrDataLoss)
	}
	m, err := r.imageManifest(ctx, raw, mt, ident)
	if err != nil {
		return nil, err
	}
	if err := checkLayers(m.Layers, ident); err != nil {
		return nil, err
	}
	for _, l := range m.Layers {
		res.layers = append(res.layers, l.desc())
	}
	if res.id, res.config, err = r.config(ctx, m.Config.desc()); err != nil {
		return nil, err
	}
	return res, nil
}

// imageManifest follows indexes from raw down to an image manifest.
func (r *registry) imageManifest(ctx context.Context, raw []byte, declared types.MediaType, what string) (*anyManifest, error) {
	for depth := 0; ; depth++ {
		m, err := parseManifest(raw, declared)
		if err != nil {
			return nil, fmt.Errorf("manifest %s: %w: %w", what, errdefs.ErrInvalidArgument, err)
		}
		if !m.MediaType.IsIndex() {
			return m, nil
		}
		if depth == MaxIndexDepth {
			return nil, fmt.Errorf("index %s: one more index below %d, the index depth bound: %w", what, MaxIndexDepth, errdefs.ErrInvalidArgument)
		}
		child, err := pickPlatform(m.Manifests, what)
		if err != nil {
			return nil, err
		}
		if raw, err = r.child(ctx, child); err != nil {
			return nil, err
		}
		declared, what = child.MediaType, child.Digest.String()
	}
}

// parseManifest reads an image manifest or an index. Its kind is the one
// its mediaType field says, else the one the registry or the parent index
// declared, else the one its fields show; a registry or an index that
// declares the other kind, or fields of the other kind, make it invalid.
func parseManifest(raw []byte, declared types.MediaType) (*anyManifest, error) {
	var m anyManifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	if m.SchemaVersion != 2 {
		return nil, fmt.Errorf("schema version %d, not 2 (schema 1 is not supported)", m.SchemaVersion)
	}
	known := func(mt types.MediaType) bool { return mt.IsIndex() || mt.IsImage() }
	switch {
	case m.MediaType != "" && !known(m.MediaType):
		return nil, fmt.Errorf("media type %q is neither an image manifest nor an index", m.MediaType)
	case m.MediaType != "" && known(declared) && declared.IsIndex() != m.MediaType.IsIndex():
		return nil, fmt.Errorf("served as %s, but its media type is %s", declared, m.MediaType)
	case m.MediaType == "" && known(declared):
		m.MediaType = declared
	case m.MediaType == "" && m.Manifests != nil:
		m.MediaType = types.OCIImageIndex
	case m.MediaType == "":
		m.MediaType = types.OCIManifestSchema1
	}
	if m.MediaType.IsIndex() && (m.Config != nil || m.Layers != nil) {
		return nil, fmt.Errorf("an index (%s) with the config or layers of an image manifest", m.MediaType)
	}
	if m.MediaType.IsImage() && (m.Manifests != nil || m.Config == nil) {
		return nil, fmt.Errorf("an image manifest (%s) without a config or with the manifests of an index", m.MediaType)
	}
	return &m, nil
}

// pickPlatform is the first child for linux/GOARCH; a child without a
// platform is taken for linux/amd64, as go-containerregistry does.
func pickPlatform(children []blobRef, index string) (blobRef, error) {
	for _, c := range children {
		p := v1.Platform{OS: "linux", Architecture: "amd64"}
		if c.Platform != nil {
			p = *c.Platform
		}
		if p.OS == "linux" && p.Architecture == runtime.GOARCH && (c.MediaType == "" || c.MediaType.IsIndex() || c.MediaType.IsImage()) {
			return c, nil
		}
	}
	return blobRef{}, fmt.Errorf("index %s has no image for linux/%s: %w", index, runtime.GOARCH, errdefs.ErrNotFound)
}

// child fetches an index's child manifest: its declared size is bounded
// before the request, its content checked against the descriptor after.
func (r *registry) child(ctx context.Context, d blobRef) ([]byte, error) {
	if d.Size > MaxManifestSize {
		return nil, overBound("manifest "+d.Digest.String(), d.Size, "manifest size bound", MaxManifestSize)
	}
	if d.Size < 0 {
		return nil, fmt.Errorf("manifest %s has a negative size: %w", d.Digest, errdefs.ErrInvalidArgument)
	}
	if d.Digest.Algorithm != "sha256" {
		return nil, fmt.Errorf("manifest %s: digest algorithm %q: %w", d.Digest, d.Digest.Algorithm, errdefs.ErrNotImplemented)
	}
	raw, _, err := r.manifest(ctx, d.Digest.String())
	if err != nil {
		return nil, err
	}
	return raw, verify(raw, d.desc(), "manifest")
}

// checkLayers bounds the number of layers and refuses sizes no blob has.
func checkLayers(layers []blobRef, manifest string) error {
	if len(layers) > MaxLayers {
		return fmt.Errorf("manifest %s: %d layers, over the layer count bound of %d: %w", manifest, len(layers), MaxLayers, errdefs.ErrInvalidArgument)
	}
	for _, l := range layers {
		if l.Size < 0 {
			return fmt.Errorf("manifest %s: layer %s has a negative size: %w", manifest, l.Digest, errdefs.ErrInvalidArgument)
		}
	}
	return nil
}

// config reads the image's config (MaxConfigSize at most) and refuses an
// image made for another platform.
func (r *registry) config(ctx context.Context, d v1.Descriptor) (v1.Hash, ocispec.Image, error) {
	var cfg ocispec.Image
	raw, err := r.smallBlob(ctx, d, "config", MaxConfigSize, "config size bound")
	if err != nil {
		return d.Digest, cfg, err
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return d.Digest, cfg, fmt.Errorf("config %s: %w: %w", d.Digest, errdefs.ErrInvalidArgument, err)
	}
	if (cfg.OS != "" && cfg.OS != "linux") || (cfg.Architecture != "" && cfg.Architecture != runtime.GOARCH) {
		return d.Digest, cfg, fmt.Errorf("config %s: the image is for %s/%s, this node runs linux/%s: %w", d.Digest, cfg.OS, cfg.Architecture, runtime.GOARCH, errdefs.ErrNotFound)
	}
	return d.Digest, cfg, nil
}
