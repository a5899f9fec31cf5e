package image

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sync/errgroup"
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
// only. Every read is bounded (limits.go); on an error nothing the pull added
// stays in the store.
func (s *Store) Pull(ctx context.Context, refStr string, auth *Auth) (Image, error) {
	r, err := parseRef(refStr)
	if err != nil {
		return Image{}, err
	}
	reg, res, err := s.resolve(ctx, r, auth)
	if err != nil {
		return Image{}, fmt.Errorf("pull %s: %w", r.canonical, err)
	}
	img, err := s.fetchImage(ctx, reg, r, res)
	if err != nil {
		return Image{}, fmt.Errorf("pull %s from %s: %w", r.canonical, reg.ep.desc, diskClass(err))
	}
	return img, nil
}

// resolve tries each endpoint in turn for the manifests and the config;
// the error names them all. A tag is resolved to its digest only by a host
// trusted to (capability resolve); a host that may only pull is asked for
// that digest, and what it sends is checked against it.
func (s *Store) resolve(ctx context.Context, r ref, auth *Auth) (*registry, *resolved, error) {
	eps, err := s.endpoints(r)
	if err != nil {
		return nil, nil, err
	}
	var errs []error
	digest := "" // the tag's, once a resolving host said it
	for _, ep := range eps {
		if r.tag != "" && ep.caps&capResolve == 0 {
			if digest == "" {
				if digest, err = s.resolveTag(ctx, r, eps, auth); err != nil {
					return nil, nil, err
				}
			}
			ep = ep.atDigest(digest)
		}
		reg, err := s.dial(ctx, ep, auth)
		if err == nil {
			var res *resolved
			if res, err = reg.resolve(ctx); err == nil {
				return reg, res, nil
			}
		}
		if ctx.Err() != nil {
			return nil, nil, err
		}
		errs = append(errs, fmt.Errorf("%s: %w", ep.desc, err))
		if ep.mirror {
			s.log.WithError(err).WithField("ref", r.canonical).Info("image pull: mirror failed, trying the next endpoint")
		}
	}
	return nil, nil, joinErrs(errs)
}

// resolveTag asks the hosts that may resolve, in order, for the digest of
// r's tag (its manifest's, as they serve it).
func (s *Store) resolveTag(ctx context.Context, r ref, eps []endpoint, auth *Auth) (string, error) {
	var errs []error
	for _, ep := range eps {
		if ep.caps&capResolve == 0 {
			continue
		}
		reg, err := s.dial(ctx, ep, auth)
		if err == nil {
			var raw []byte
			if raw, _, err = reg.manifest(ctx, r.tag); err == nil {
				return sha256Of(raw).String(), nil
			}
		}
		if ctx.Err() != nil {
			return "", err
		}
		errs = append(errs, fmt.Errorf("%s: resolve %s: %w", ep.desc, r.tag, err))
	}
	if len(errs) == 0 {
		return "", fmt.Errorf("no configured host of %s may resolve the tag %s (capability resolve): %w", r.host, r.tag, errdefs.ErrInvalidArgument)
	}
	return "", joinErrs(errs)
}

// fetchImage makes sure each layer is unpacked and commits the record. The
// layers are pinned for the whole pull so that a concurrent Remove does not
// collect them; on failure the layers this pull unpacked and no image uses
// are collected.
func (s *Store) fetchImage(ctx context.Context, reg *registry, r ref, res *resolved) (Image, error) {
	diffIDs, chains, err := layerIDs(res)
	if err != nil {
		return Image{}, err
	}
	s.pin(chains, 1)
	defer func() {
		s.mu.Lock()
		s.pinLocked(chains, -1)
		doomed := s.collectLocked()
		s.mu.Unlock()
		removeAll(s.log, doomed)
	}()
	img := &Image{ID: res.id.String(), Config: res.config.Config, Layers: chains}
	if img.Size, err = s.fetchLayers(ctx, reg, res, diffIDs, chains); err != nil {
		return Image{}, err
	}
	return s.commit(r, res.digest, img)
}

// layerIDs are the diff ids the config lists, one per layer of the
// manifest, and the chain ids they make.
func layerIDs(res *resolved) (diffIDs, chains []string, err error) {
	if len(res.layers) != len(res.config.RootFS.DiffIDs) {
		return nil, nil, fmt.Errorf("manifest has %d layers, config %s lists %d diff ids: %w", len(res.layers), res.id, len(res.config.RootFS.DiffIDs), errdefs.ErrDataLoss)
	}
	diffIDs = make([]string, len(res.layers))
	for i, d := range res.config.RootFS.DiffIDs {
		diffIDs[i] = string(d)
	}
	if chains, err = chainIDs(diffIDs); err != nil {
		return nil, nil, fmt.Errorf("config %s: %w", res.id, err)
	}
	return diffIDs, chains, nil
}

// fetchLayers makes sure every layer is unpacked, MaxConcurrentDownloads
// at a time, and returns the image's size. The compressed sizes the
// manifest declares are held to the image size bound before any download,
// the uncompressed ones while they unpack.
func (s *Store) fetchLayers(ctx context.Context, reg *registry, res *resolved, diffIDs, chains []string) (uint64, error) {
	b := newBudget(s.limits.MaxImageSize)
	var declared int64 // saturating: not negative (checkLayers), but as large as a registry says
	for _, l := range res.layers {
		if l.Size > math.MaxInt64-declared {
			declared = math.MaxInt64
			break
		}
		declared += l.Size
	}
	if declared > b.limit {
		return 0, overBound("the layers of manifest "+res.digest.String(), declared, "image size bound", b.limit)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.limits.MaxConcurrentDownloads)
	sizes := make([]uint64, len(chains))
	for i, d := range res.layers {
		j := layerJob{desc: d, chain: chains[i], diffID: diffIDs[i], budget: b}
		g.Go(func() error {
			rec, err := s.ensureLayer(gctx, reg, j)
			sizes[i] = rec.Size
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	var total uint64
	for _, n := range sizes {
		total += n
	}
	return total, nil
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
