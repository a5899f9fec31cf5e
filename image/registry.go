package image

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/internal/errmark"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// registry is one endpoint of a pull. go-containerregistry's transport does
// the ping, the token exchange, basic auth and the retries of transient
// failures; the requests and their reads are this package's, so that each
// body is bounded before it is read and watched for progress. (Its remote
// package reads a manifest of up to 100 MiB, a config of any size, and
// indexes nested without end.)
type registry struct {
	ep      endpoint
	repo    name.Repository
	client  *http.Client
	timeout time.Duration // the pull progress timeout
}

// baseTransport is the connection pool every pull shares.
var baseTransport = transport.NewRetry(remote.DefaultTransport)

// acceptManifests are the media types a pull asks for; not schema 1.
var acceptManifests = strings.Join([]string{string(types.OCIImageIndex), string(types.OCIManifestSchema1),
	string(types.DockerManifestList), string(types.DockerManifestSchema2)}, ",")

// dial authenticates to the endpoint for pulls from its repository.
func (s *Store) dial(ctx context.Context, ep endpoint, auth *Auth) (*registry, error) {
	repo := ep.ref.Context()
	w := watchStall(ctx, s.limits.ProgressTimeout, "ping "+repo.RegistryStr())
	defer w.stop()
	base, err := s.transportFor(ep)
	if err != nil {
		return nil, err
	}
	tr, err := transport.NewWithContext(w.ctx, repo.Registry, auth.authFor(ep.host), base, []string{repo.Scope(transport.PullScope)})
	if err != nil {
		return nil, w.explain(classify(err))
	}
	client := &http.Client{Transport: tr, CheckRedirect: refuseInwardRedirect}
	return &registry{ep: ep, repo: repo, client: client, timeout: s.limits.ProgressTimeout}, nil
}

// get sends GET /v2/<repo>/<path> and returns the body of a 200, watched
// for progress; the caller closes it.
func (r *registry) get(ctx context.Context, path, accept string) (io.ReadCloser, int64, http.Header, error) {
	u := url.URL{Scheme: cmp.Or(r.ep.scheme, r.repo.Scheme()), Host: r.repo.RegistryStr(), Path: "/v2/" + r.repo.RepositoryStr() + "/" + path}
	if r.ep.mirror {
		// Which registry's content is asked for, as containerd tells a
		// mirror (one mirror may serve several).
		u.RawQuery = url.Values{"ns": {r.ep.ns}}.Encode()
	}
	w := watchStall(ctx, r.timeout, "GET "+path)
	req, err := http.NewRequestWithContext(w.ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		w.stop()
		return nil, 0, nil, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := r.client.Do(req)
	if err == nil {
		if err = transport.CheckError(resp, http.StatusOK); err != nil {
			resp.Body.Close()
		}
	}
	if err != nil {
		err = w.explain(classify(err))
		w.stop()
		return nil, 0, nil, err
	}
	return &watchedBody{body: resp.Body, watch: w}, resp.ContentLength, resp.Header, nil
}

// manifest fetches the manifest or index ident names (a tag or a digest),
// at most MaxManifestSize bytes, with the media type the registry gives it.
func (r *registry) manifest(ctx context.Context, ident string) ([]byte, types.MediaType, error) {
	body, length, h, err := r.get(ctx, "manifests/"+ident, acceptManifests)
	if err != nil {
		return nil, "", fmt.Errorf("manifest %s: %w", ident, err)
	}
	defer body.Close()
	raw, err := readBounded(body, length, MaxManifestSize, "manifest "+ident, "manifest size bound")
	if err != nil {
		return nil, "", err
	}
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return raw, types.MediaType(mt), nil
}

// blob opens the blob d names; a registry that announces more bytes than
// the manifest declares is refused before its body is read.
func (r *registry) blob(ctx context.Context, d v1.Descriptor) (io.ReadCloser, error) {
	if d.Digest.Algorithm != "sha256" {
		return nil, fmt.Errorf("blob %s: digest algorithm %q: %w", d.Digest, d.Digest.Algorithm, errdefs.ErrNotImplemented)
	}
	body, length, _, err := r.get(ctx, "blobs/"+d.Digest.String(), "")
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", d.Digest, err)
	}
	if length > d.Size {
		body.Close()
		return nil, fmt.Errorf("blob %s: the registry announces %d bytes, the manifest declares %d: %w", d.Digest, length, d.Size, errdefs.ErrDataLoss)
	}
	return body, nil
}

// smallBlob reads the blob d names whole, when its declared size is within
// limit, and verifies its size and digest.
func (r *registry) smallBlob(ctx context.Context, d v1.Descriptor, what string, limit int64, bound string) ([]byte, error) {
	if d.Size > limit {
		return nil, overBound(what+" "+d.Digest.String(), d.Size, bound, limit)
	}
	body, err := r.blob(ctx, d)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	raw, err := readBounded(body, -1, d.Size, what+" "+d.Digest.String(), "size its descriptor declares")
	if errdefs.IsInvalidArgument(err) {
		// Not a bound of ours crossed: content that is not what its
		// descriptor says.
		return nil, fmt.Errorf("%s %s: the registry sent more than the %d bytes its descriptor declares: %w", what, d.Digest, d.Size, errdefs.ErrDataLoss)
	}
	if err != nil {
		return nil, err
	}
	return raw, verify(raw, d, what)
}

// readBounded reads r whole: at most limit bytes, refused before reading
// when the announced length (-1: unknown) is over it. The buffer grows by
// doubling up to limit bytes, no further: a body one byte longer is refused
// without a copy.
func readBounded(r io.Reader, length, limit int64, what, bound string) ([]byte, error) {
	if length > limit {
		return nil, overBound(what, length, bound, limit)
	}
	buf := make([]byte, 0, min(limit, max(length, 64<<10)))
	for {
		if len(buf) == cap(buf) && int64(len(buf)) < limit {
			grown := make([]byte, len(buf), min(2*int64(cap(buf)), limit))
			buf = grown[:copy(grown, buf)]
		}
		if len(buf) == cap(buf) {
			return buf, atEOF(r, what, bound, limit)
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: read after %d bytes: %w", what, len(buf), classify(err))
		}
	}
}

// atEOF checks that r, read up to limit, has nothing more.
func atEOF(r io.Reader, what, bound string, limit int64) error {
	n, err := io.ReadFull(r, make([]byte, 1))
	switch {
	case n > 0:
		return overBound(what, -1, bound, limit)
	case err == io.EOF:
		return nil
	}
	return fmt.Errorf("%s: read after %d bytes: %w", what, limit, classify(err))
}

// verify checks content read whole against its descriptor.
func verify(raw []byte, d v1.Descriptor, what string) error {
	got := sha256Of(raw)
	if int64(len(raw)) != d.Size || got != d.Digest {
		return fmt.Errorf("%s %s: the registry sent %d bytes of digest %s, the descriptor declares %d bytes: %w",
			what, d.Digest, len(raw), got, d.Size, errdefs.ErrDataLoss)
	}
	return nil
}

func sha256Of(b []byte) v1.Hash {
	sum := sha256.Sum256(b)
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
}

// classify gives a registry error its errdefs class, keeping its text. An
// error already classified (a stall, a bound) keeps its class.
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
	if errdefs.Resolve(err) != errdefs.ErrUnknown {
		return err
	}
	return errmark.Mark(err, errdefs.ErrUnavailable)
}

// refuseInwardRedirect refuses a redirect from a registry to a private,
// loopback or link-local address (a cloud's metadata service, the node's
// own ports), as go-containerregistry's client does; a registry that is
// itself at such an address may redirect within its network.
func refuseInwardRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	from, to := via[0].URL.Hostname(), req.URL.Hostname()
	if inward(to) && !inward(from) {
		return fmt.Errorf("redirect from %s to %s refused: a private address", from, to)
	}
	return nil
}

func inward(host string) bool {
	a, err := netip.ParseAddr(host)
	return err == nil && (a.IsPrivate() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsUnspecified())
}
