package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/internal/errmark"
	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Auth is the credential of a pull request, as CRI's AuthConfig carries it:
// a username and password (or Auth, their base64 "user:password"), or an
// identity token to exchange, or a registry bearer token.
type Auth struct {
	Username      string
	Password      string
	Auth          string
	IdentityToken string
	RegistryToken string
	// ServerAddress, when set, limits the credential to the endpoint of
	// that host (a mirror or the registry); empty means every endpoint of
	// the pull.
	ServerAddress string
}

// authFor is the authenticator a pull uses at host.
func (a *Auth) authFor(host string) authn.Authenticator {
	if a == nil || (a.ServerAddress != "" && !sameHost(a.ServerAddress, host)) {
		return authn.Anonymous
	}
	return authn.FromConfig(authn.AuthConfig{
		Username: a.Username, Password: a.Password, Auth: a.Auth,
		IdentityToken: a.IdentityToken, RegistryToken: a.RegistryToken,
	})
}

// sameHost compares a server address as kubelet writes it ("host",
// "https://host/v1/") with a registry host.
func sameHost(addr, host string) bool {
	if u, err := url.Parse(addr); err == nil && u.Host != "" {
		addr = u.Host
	}
	norm := func(h string) string {
		if h == dockerHub || h == "registry-1.docker.io" {
			return "docker.io"
		}
		return h
	}
	return norm(addr) == norm(host)
}

// Pull fetches ref (for an index, its linux/GOARCH image), verifies every
// blob, unpacks the layers not yet in the store and records the image under
// ref's normalized name, which moves to it from any image that held it. An
// image whose layers are all present costs the manifest and config fetches
// only. On an error nothing the pull added stays in the store.
func (s *Store) Pull(ctx context.Context, refStr string, auth *Auth) (Image, error) {
	r, err := parseRef(refStr)
	if err != nil {
		return Image{}, err
	}
	src, err := s.fetchManifest(ctx, r, auth)
	if err != nil {
		return Image{}, fmt.Errorf("pull %s: %w", r.canonical, err)
	}
	img, err := s.fetchImage(ctx, r, src)
	if err != nil {
		return Image{}, fmt.Errorf("pull %s from %s: %w", r.canonical, src.ep.desc, err)
	}
	return img, nil
}

// source is a resolved manifest: where it came from and its image.
type source struct {
	ep     endpoint
	digest v1.Hash // of the manifest the reference names (an index's, if it named one)
	img    v1.Image
}

// fetchManifest tries each endpoint in turn; the error names them all.
func (s *Store) fetchManifest(ctx context.Context, r ref, auth *Auth) (*source, error) {
	eps, err := s.endpoints(r)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, ep := range eps {
		src, err := getManifest(ctx, ep, auth)
		if err == nil {
			return src, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		errs = append(errs, fmt.Errorf("%s: %w", ep.desc, err))
		if ep.mirror {
			s.log.WithError(err).WithField("ref", r.canonical).Info("image pull: mirror failed, trying the next endpoint")
		}
	}
	return nil, joinErrs(errs)
}

func getManifest(ctx context.Context, ep endpoint, auth *Auth) (*source, error) {
	platform := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	desc, err := remote.Get(ep.ref, remote.WithContext(ctx), remote.WithAuth(auth.authFor(ep.host)), remote.WithPlatform(platform))
	if err != nil {
		return nil, classify(err)
	}
	img, err := desc.Image()
	if err != nil {
		// Most often an index without our platform, or an artifact
		// that is not an image.
		return nil, errmark.Mark(err, errdefs.ErrNotFound)
	}
	return &source{ep: ep, digest: desc.Digest, img: img}, nil
}

// classify gives a registry error its errdefs class, keeping its text.
func classify(err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusUnauthorized:
			return errmark.Mark(err, errdefs.ErrUnauthenticated)
		case http.StatusForbidden:
			return errmark.Mark(err, errdefs.ErrPermissionDenied)
		case http.StatusNotFound:
			return errmark.Mark(err, errdefs.ErrNotFound)
		case http.StatusTooManyRequests:
			return errmark.Mark(err, errdefs.ErrResourceExhausted)
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return errmark.Mark(err, errdefs.ErrUnavailable)
}

// fetchImage reads the config, makes sure each layer is unpacked and
// commits the record. The layers are pinned for the whole pull so that a
// concurrent Remove does not collect them; on failure the layers this pull
// unpacked and no image uses are collected.
func (s *Store) fetchImage(ctx context.Context, r ref, src *source) (Image, error) {
	id, cfg, err := readConfig(src.img)
	if err != nil {
		return Image{}, err
	}
	layers, err := src.img.Layers()
	if err != nil {
		return Image{}, classify(err)
	}
	if len(layers) != len(cfg.RootFS.DiffIDs) {
		return Image{}, fmt.Errorf("manifest has %d layers, config %s lists %d diff ids: %w", len(layers), id, len(cfg.RootFS.DiffIDs), errdefs.ErrDataLoss)
	}
	diffIDs := make([]string, len(cfg.RootFS.DiffIDs))
	for i, d := range cfg.RootFS.DiffIDs {
		diffIDs[i] = string(d)
	}
	chains, err := chainIDs(diffIDs)
	if err != nil {
		return Image{}, fmt.Errorf("config %s: %w", id, err)
	}
	s.pin(chains, 1)
	defer func() {
		s.mu.Lock()
		s.pinLocked(chains, -1)
		doomed := s.collectLocked()
		s.mu.Unlock()
		removeAll(s.log, doomed)
	}()
	img := &Image{ID: id.String(), Config: cfg.Config, Layers: chains}
	for i, l := range layers {
		rec, err := s.ensureLayer(ctx, l, chains[i], diffIDs[i])
		if err != nil {
			return Image{}, err
		}
		img.Size += rec.Size
	}
	return s.commit(r, src.digest, img)
}

// readConfig returns the config's digest (the image ID) and content, and
// refuses an image made for another platform.
func readConfig(img v1.Image) (v1.Hash, ocispec.Image, error) {
	var cfg ocispec.Image
	id, err := img.ConfigName()
	if err != nil {
		return id, cfg, classify(err)
	}
	// The remote image verifies the config blob against the manifest's
	// config digest as it reads it.
	raw, err := img.RawConfigFile()
	if err != nil {
		return id, cfg, classify(err)
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return id, cfg, fmt.Errorf("config %s: %w: %w", id, errdefs.ErrInvalidArgument, err)
	}
	if (cfg.OS != "" && cfg.OS != "linux") || (cfg.Architecture != "" && cfg.Architecture != runtime.GOARCH) {
		return id, cfg, fmt.Errorf("config %s: the image is for %s/%s, this node runs linux/%s: %w", id, cfg.OS, cfg.Architecture, runtime.GOARCH, errdefs.ErrNotFound)
	}
	return id, cfg, nil
}

func (s *Store) pin(chains []string, delta int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pinLocked(chains, delta)
}

func (s *Store) pinLocked(chains []string, delta int) {
	for _, c := range chains {
		if s.pinned[c] += delta; s.pinned[c] <= 0 {
			delete(s.pinned, c)
		}
	}
}

// commit records img under r's name and the repository digest, merging
// with the names the image already has and taking them from any other
// image (a tag names one image at a time).
func (s *Store) commit(r ref, manifest v1.Hash, img *Image) (Image, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := []string{r.repository() + "@" + manifest.String()}
	if r.tag != "" {
		names = append(names, r.canonical)
	}
	if old := s.images[img.ID]; old != nil {
		img.RepoTags, img.RepoDigests = slices.Clone(old.RepoTags), slices.Clone(old.RepoDigests)
	}
	for _, n := range names {
		if err := s.takeNameLocked(n, img.ID); err != nil {
			return Image{}, err
		}
		if strings.Contains(n, "@") {
			img.RepoDigests = appendNew(img.RepoDigests, n)
		} else {
			img.RepoTags = appendNew(img.RepoTags, n)
		}
	}
	if err := writeJSON(s.imagePath(img.ID), img); err != nil {
		return Image{}, fmt.Errorf("record image %s: %w", img.ID, err)
	}
	s.addLocked(img)
	return img.clone(), nil
}

// takeNameLocked removes name from the image that holds it, if not id.
func (s *Store) takeNameLocked(name, id string) error {
	prev, ok := s.names[name]
	if !ok || prev == id {
		return nil
	}
	old := s.images[prev].clone()
	old.RepoTags = slices.DeleteFunc(old.RepoTags, func(n string) bool { return n == name })
	old.RepoDigests = slices.DeleteFunc(old.RepoDigests, func(n string) bool { return n == name })
	if err := writeJSON(s.imagePath(old.ID), &old); err != nil {
		return fmt.Errorf("move %s from image %s: %w", name, old.ID, err)
	}
	s.images[prev] = &old
	delete(s.names, name)
	return nil
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// multiErr is several errors in one: its text joins theirs with "; " and
// errors.Is sees each.
type multiErr []error

func (m multiErr) Error() string {
	parts := make([]string, len(m))
	for i, e := range m {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

func (m multiErr) Unwrap() []error { return m }

func joinErrs(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	return multiErr(errs)
}
