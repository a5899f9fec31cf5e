package image

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/internal/errmark"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// maxTransports bounds the transports kept for hosts with TLS settings
// of their own (one per distinct set of files and contents).
const maxTransports = 32

// transportFor is the connection pool of an endpoint: the shared one,
// or for an https host with TLS settings (ca, client, skip_verify) one of
// its own, kept across pulls while its files' contents are the same.
func (s *Store) transportFor(ep endpoint) (http.RoundTripper, error) {
	if ep.tls.zero() || ep.scheme == "http" {
		return baseTransport, nil
	}
	cfg, key, err := loadTLS(ep.tls)
	if err != nil {
		return nil, err
	}
	s.tmu.Lock()
	defer s.tmu.Unlock()
	if t, ok := s.transports[key]; ok {
		return t.rt, nil
	}
	if len(s.transports) >= maxTransports {
		for k, t := range s.transports {
			t.base.CloseIdleConnections()
			delete(s.transports, k)
		}
	}
	base := remote.DefaultTransport.(*http.Transport).Clone()
	base.TLSClientConfig = cfg
	t := hostTransport{base: base, rt: transport.NewRetry(base)}
	s.transports[key] = t
	return t.rt, nil
}

type hostTransport struct {
	base *http.Transport
	rt   http.RoundTripper
}

// loadTLS reads a host's TLS files: the CAs are added to the system's
// roots (as containerd does), each client pair is a certificate offered
// to a registry that asks for one. key identifies the settings and the
// files' contents.
func loadTLS(t tlsFiles) (*tls.Config, string, error) {
	sum := sha256.New()
	fmt.Fprintf(sum, "skip %v\n", t.skipVerify)
	bad := func(path string, err error) error {
		return errmark.Mark(fmt.Errorf("TLS file %s: %w", path, err), errdefs.ErrInvalidArgument)
	}
	cfg := &tls.Config{InsecureSkipVerify: t.skipVerify} //nolint:gosec // the host's skip_verify says so
	if len(t.cas) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		for _, p := range t.cas {
			pem, err := os.ReadFile(p)
			if err != nil {
				return nil, "", bad(p, err)
			}
			if !pool.AppendCertsFromPEM(pem) {
				return nil, "", bad(p, fmt.Errorf("no PEM certificate"))
			}
			fmt.Fprintf(sum, "ca %d %s\n", len(pem), pem)
		}
		cfg.RootCAs = pool
	}
	for _, c := range t.clients {
		cert, err := os.ReadFile(c[0])
		if err != nil {
			return nil, "", bad(c[0], err)
		}
		key := cert
		if c[1] != "" {
			if key, err = os.ReadFile(c[1]); err != nil {
				return nil, "", bad(c[1], err)
			}
		}
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			return nil, "", bad(c[0], err)
		}
		cfg.Certificates = append(cfg.Certificates, pair)
		fmt.Fprintf(sum, "client %d %s %d %s\n", len(cert), cert, len(key), key)
	}
	return cfg, hex.EncodeToString(sum.Sum(nil)), nil
}
