package image

import (
	"fmt"
	"net/url"
	"strings"

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
	mirror bool
}

// endpoints lists where r is pulled from: its host's mirrors in the order
// configured, then the host itself.
func (s *Store) endpoints(r ref) ([]endpoint, error) {
	var eps []endpoint
	for _, m := range s.mirrorsOf(r.host) {
		u, err := url.Parse(m)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" {
			return nil, fmt.Errorf("mirror %q of %s: want http(s)://host[:port]: %w", m, r.host, errdefs.ErrInvalidArgument)
		}
		ep, err := r.at(u.Host, u.Scheme == "http")
		if err != nil {
			return nil, fmt.Errorf("mirror %q of %s: %w", m, r.host, err)
		}
		ep.desc, ep.mirror = "mirror "+m, true
		eps = append(eps, ep)
	}
	ep, err := r.at(r.host, s.insec[r.host])
	if err != nil {
		return nil, err
	}
	ep.desc = r.host
	return append(eps, ep), nil
}

func (s *Store) mirrorsOf(host string) []string {
	if m, ok := s.mirror[host]; ok || host != "docker.io" {
		return m
	}
	return s.mirror[dockerHub]
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
