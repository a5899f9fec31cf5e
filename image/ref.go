package image

import (
	"fmt"

	"github.com/containerd/errdefs"
	"github.com/google/go-containerregistry/pkg/name"
)

// dockerHub is how go-containerregistry names Docker Hub; kubelet and
// crictl call it docker.io, and so do the names this store records.
const dockerHub = "index.docker.io"

// ref is a parsed image reference.
type ref struct {
	host string // registry host as users write it ("docker.io", "registry.k8s.io")
	repo string // repository path ("library/busybox")
	tag  string // set for a tag reference
	dig  string // set for a digest reference ("sha256:...")
	// canonical is the normalized name: "docker.io/library/busybox:1.29"
	// or "docker.io/library/busybox@sha256:...".
	canonical string
}

// parseRef parses and normalizes s; a name without a tag gets "latest".
func parseRef(s string) (ref, error) {
	if s == "" {
		return ref{}, fmt.Errorf("image reference is empty: %w", errdefs.ErrInvalidArgument)
	}
	n, err := name.ParseReference(s)
	if err != nil {
		return ref{}, fmt.Errorf("image reference %q: %w: %w", s, errdefs.ErrInvalidArgument, err)
	}
	r := ref{host: n.Context().RegistryStr(), repo: n.Context().RepositoryStr()}
	if r.host == dockerHub {
		r.host = "docker.io"
	}
	switch n := n.(type) {
	case name.Tag:
		r.tag = n.TagStr()
		r.canonical = r.repository() + ":" + r.tag
	case name.Digest:
		r.dig = n.DigestStr()
		r.canonical = r.repository() + "@" + r.dig
	}
	return r, nil
}

// repository is "host/repo", the part of a name before the tag or digest.
func (r ref) repository() string { return r.host + "/" + r.repo }

// endpoint is one place a reference can be pulled from.
type endpoint struct {
	ref    name.Reference
	desc   string // for errors: "mirror http://127.0.0.1:5000" or "registry.k8s.io"
	host   string // host[:port] the requests go to, for Auth.ServerAddress
	mirror bool   // not the reference's own host
	// scheme is "https" or "http" as configured; "" leaves it to
	// go-containerregistry (https, but plain http for local addresses).
	scheme string
	caps   int      // capPull, capResolve
	tls    tlsFiles // an https host's own TLS settings
	ns     string   // the reference's registry host, told to a mirror (?ns=)
}

// endpoints lists where r is pulled from, in order: its host's configured
// hosts (hostsOf) that may pull.
func (s *Store) endpoints(r ref) ([]endpoint, error) {
	hosts, err := s.hostsOf(r.host)
	if err != nil {
		return nil, err
	}
	var eps []endpoint
	for _, h := range hosts {
		if h.caps&capPull == 0 {
			continue
		}
		ep, err := r.at(h.host, h.scheme == "http")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", h.from, err)
		}
		ep.desc, ep.mirror, ep.scheme, ep.caps, ep.tls, ep.ns = h.from, h.mirror, h.scheme, h.caps, h.tls, r.host
		eps = append(eps, ep)
	}
	if len(eps) == 0 {
		return nil, fmt.Errorf("no configured host of %s may pull (capability pull): %w", r.host, errdefs.ErrInvalidArgument)
	}
	return eps, nil
}

func (s *Store) mirrorsOf(host string) []string {
	if m, ok := s.mirror[host]; ok || host != "docker.io" {
		return m
	}
	return s.mirror[dockerHub]
}

// atDigest is ep for the manifest digest d instead of a tag: what a host
// that may pull but not resolve serves.
func (ep endpoint) atDigest(d string) endpoint {
	ep.ref = ep.ref.Context().Digest(d)
	return ep
}

// at is r on another registry host, with the same repository and tag.
func (r ref) at(host string, insecure bool) (endpoint, error) {
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	repo, err := name.NewRepository(host+"/"+r.repo, opts...)
	if err != nil {
		return endpoint{}, fmt.Errorf("%s/%s: %w: %w", host, r.repo, errdefs.ErrInvalidArgument, err)
	}
	ep := endpoint{host: host}
	if r.dig != "" {
		ep.ref = repo.Digest(r.dig)
	} else {
		ep.ref = repo.Tag(r.tag)
	}
	return ep, nil
}
