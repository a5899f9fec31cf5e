package image

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/internal/errmark"
)

// A registry host namespace's configuration, in containerd's hosts.toml
// format (docs/images.md, Registry hosts): under the hosts dir, a dir per
// registry host ("registry.k8s.io", "127.0.0.1:5000" or its form
// "127.0.0.1_5000_", "_default" for any host without one) holding a
// hosts.toml:
//
//	server = "https://registry.example.com"   # the upstream; default: the namespace's host
//	ca = "ca.pem"                              # root-level fields are the server's
//	[host."https://mirror.example.com"]        # tried before the server, in file order
//	  capabilities = ["pull"]                  # pull, resolve, push; default all
//	  ca = ["/etc/certs/a.pem", "b.pem"]       # a path or a list; relative to the file's dir
//	  client = [["c.cert", "c.key"]]           # a path (cert and key in one file), a list of such, or pairs
//	  skip_verify = true
//
// A dir without hosts.toml gives its Docker-style certificate files to the
// server: *.crt CAs, *.cert with the *.key of the same name as client
// pairs.

// Host capabilities, as hosts.toml names them.
const (
	capPull = 1 << iota
	capResolve
	capPush
	capAll = capPull | capResolve | capPush
)

// registryHost is one place a namespace's pulls may go: a mirror, or the
// server (the upstream).
type registryHost struct {
	scheme string // "https", "http", or "" for go-containerregistry's choice (https but for local addresses)
	host   string // host[:port]
	caps   int
	tls    tlsFiles
	mirror bool
	// from says where it was configured, for errors: "mirror
	// https://m.example.com (/etc/containerd/certs.d/docker.io/hosts.toml)".
	from string
}

// tlsFiles are a host's TLS settings: paths, read when the host is dialled.
type tlsFiles struct {
	cas        []string
	clients    [][2]string // cert, key ("" when the cert file holds the key)
	skipVerify bool
}

func (t tlsFiles) zero() bool { return len(t.cas) == 0 && len(t.clients) == 0 && !t.skipVerify }

// hostsFileName is the file of a host namespace's dir.
const hostsFileName = "hosts.toml"

// hostDirNames are the dirs of the hosts dir looked for, in order, for a
// registry host: "host_port_" (a name without a colon) then "host:port"
// for a host with a port, as containerd does.
func hostDirNames(host string) []string {
	if h, port, ok := strings.Cut(host, ":"); ok && !strings.Contains(port, ":") {
		return []string{h + "_" + port + "_", host}
	}
	return []string{host}
}

// hostsOf is the configured hosts of registry host ns, in the order they
// are tried (mirrors, then the server): from the hosts dir's namespace of
// ns, else the flags' mirrors and insecure hosts for ns, else the hosts
// dir's _default namespace, else ns itself. Read at each pull: an edit is
// taken without a restart. A hosts.toml that cannot be read or is wrong is
// InvalidArgument naming the file.
func (s *Store) hostsOf(ns string) ([]registryHost, error) {
	if s.hostsDir != "" {
		for _, name := range hostDirNames(ns) {
			dir := filepath.Join(s.hostsDir, name)
			hosts, found, err := readHostsDir(dir, ns)
			if found || err != nil {
				if err == nil && hosts == nil {
					// Docker-style certificates only: the flags' hosts,
					// the server with them.
					return s.flagHosts(ns, dir)
				}
				return hosts, err
			}
		}
	}
	if len(s.mirrorsOf(ns)) > 0 || s.insec[ns] {
		return s.flagHosts(ns, "")
	}
	if s.hostsDir != "" {
		hosts, found, err := readHostsDir(filepath.Join(s.hostsDir, "_default"), ns)
		if err != nil || (found && hosts != nil) {
			return hosts, err
		}
	}
	return s.flagHosts(ns, "")
}

// flagHosts are ns's hosts as --registry-mirror and --insecure-registry
// make them: each mirror (pull and resolve), then ns (plain http when
// insecure). certDir, when set, holds Docker-style certificates of the
// server.
func (s *Store) flagHosts(ns, certDir string) ([]registryHost, error) {
	var out []registryHost
	for _, m := range s.mirrorsOf(ns) {
		u, err := url.Parse(m)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" {
			return nil, fmt.Errorf("mirror %q of %s: want http(s)://host[:port]: %w", m, ns, errdefs.ErrInvalidArgument)
		}
		out = append(out, registryHost{scheme: u.Scheme, host: u.Host, caps: capAll, mirror: true, from: "mirror " + m})
	}
	server := registryHost{host: ns, caps: capAll, from: ns}
	if s.insec[ns] {
		server.scheme = "http"
	}
	if certDir != "" {
		var err error
		if server.tls, err = dockerCerts(certDir); err != nil {
			return nil, err
		}
		if server.scheme == "" {
			server.scheme = "https"
		}
		server.from = ns + " (certificates of " + certDir + ")"
	}
	return append(out, server), nil
}

// hostEntry is a host's fields in hosts.toml (the root level's are the
// server's).
type hostEntry struct {
	Capabilities []string `toml:"capabilities"`
	CA           any      `toml:"ca"`
	Client       any      `toml:"client"`
	SkipVerify   bool     `toml:"skip_verify"`
}

type hostsFile struct {
	Server string `toml:"server"`
	hostEntry
	Host map[string]hostEntry `toml:"host"`
}

// unsupported are hosts.toml fields containerd knows and this daemon does
// not do; refused rather than ignored, since each changes where or how the
// requests go.
var unsupported = map[string]bool{"header": true, "override_path": true, "dial_timeout": true, "proxy": true}

// readHostsDir reads dir's hosts.toml for namespace ns. found is false
// when dir does not exist; hosts is nil (and found true) when dir exists
// without a hosts.toml.
func readHostsDir(dir, ns string) (hosts []registryHost, found bool, err error) {
	file := filepath.Join(dir, hostsFileName)
	raw, err := os.ReadFile(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			return nil, true, nil
		}
		return nil, false, nil
	case err != nil:
		return nil, true, hostsErr(file, "%v", err)
	}
	hosts, err = parseHostsFile(raw, file, ns)
	return hosts, true, err
}

func hostsErr(file, format string, args ...any) error {
	return errmark.Mark(fmt.Errorf("registry hosts %s: %s", file, fmt.Sprintf(format, args...)), errdefs.ErrInvalidArgument)
}

// parseHostsFile reads a hosts.toml of namespace ns: its hosts in file
// order, then the server.
func parseHostsFile(raw []byte, file, ns string) ([]registryHost, error) {
	var f hostsFile
	md, err := toml.Decode(string(raw), &f)
	if err != nil {
		return nil, hostsErr(file, "%v", err)
	}
	for _, k := range md.Undecoded() {
		last := k[len(k)-1]
		if unsupported[last] {
			return nil, hostsErr(file, "%s: not supported by this daemon", k)
		}
		// The keys of an any field (ca, client) count as undecoded.
		if !slices.Contains(k, "ca") && !slices.Contains(k, "client") {
			return nil, hostsErr(file, "%s: unknown field", k)
		}
	}
	dir := filepath.Dir(file)
	var out []registryHost
	// md.Keys is in file order; the map is not.
	for _, k := range md.Keys() {
		if len(k) != 2 || k[0] != "host" {
			continue
		}
		h, err := parseHost(k[1], f.Host[k[1]], dir, true)
		if err != nil {
			return nil, hostsErr(file, "host %q: %v", k[1], err)
		}
		h.from, h.mirror = "mirror "+k[1]+" ("+file+")", h.host != ns
		out = append(out, h)
	}
	serverURL := f.Server
	if serverURL == "" {
		// The namespace's own host, over https unless go-containerregistry
		// takes it for a local one.
		serverURL = "//" + ns
	}
	server, err := parseHost(serverURL, f.hostEntry, dir, false)
	if err != nil {
		return nil, hostsErr(file, "server %q: %v", f.Server, err)
	}
	server.mirror = server.host != ns
	server.from = "server " + cmp.Or(f.Server, ns) + " (" + file + ")"
	return append(out, server), nil
}

// parseHost reads one host's URL and fields; paths are relative to dir.
// A URL needs a scheme unless it is the implicit server ("//host").
func parseHost(raw string, e hostEntry, dir string, needScheme bool) (registryHost, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return registryHost{}, err
	}
	switch {
	case u.Host == "":
		return registryHost{}, errors.New("want http(s)://host[:port]")
	case u.Scheme != "http" && u.Scheme != "https" && (needScheme || u.Scheme != ""):
		return registryHost{}, fmt.Errorf("scheme %q: want http or https", u.Scheme)
	case strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/v2") != "" || u.RawQuery != "" || u.Fragment != "":
		return registryHost{}, errors.New("a path, query or fragment besides /v2 is not supported (override_path is not)")
	}
	h := registryHost{scheme: u.Scheme, host: u.Host, caps: capAll}
	if e.Capabilities != nil {
		h.caps = 0
		for _, c := range e.Capabilities {
			switch c {
			case "pull":
				h.caps |= capPull
			case "resolve":
				h.caps |= capResolve
			case "push":
				h.caps |= capPush
			default:
				return h, fmt.Errorf("capability %q: want pull, resolve or push", c)
			}
		}
	}
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	cas, err := pathList(e.CA)
	if err != nil {
		return h, fmt.Errorf("ca: %v", err)
	}
	for _, p := range cas {
		h.tls.cas = append(h.tls.cas, abs(p))
	}
	if h.tls.clients, err = clientPairs(e.Client); err != nil {
		return h, fmt.Errorf("client: %v", err)
	}
	for i := range h.tls.clients {
		h.tls.clients[i] = [2]string{abs(h.tls.clients[i][0]), abs(h.tls.clients[i][1])}
	}
	h.tls.skipVerify = e.SkipVerify
	switch {
	case u.Scheme == "http" && !h.tls.zero():
		return h, errors.New("ca, client or skip_verify on a plain http host")
	case u.Scheme == "" && !h.tls.zero():
		h.scheme = "https" // TLS settings are for https, even at a local address
	}
	return h, nil
}

// pathList reads a path or a list of paths.
func pathList(v any) ([]string, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case string:
		if v == "" {
			return nil, errors.New("an empty path")
		}
		return []string{v}, nil
	case []any:
		var out []string
		for _, e := range v {
			s, ok := e.(string)
			if !ok || s == "" {
				return nil, fmt.Errorf("%v: want a path", e)
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%v: want a path or a list of paths", v)
}

// clientPairs reads client: a path (a PEM file with the certificate and
// its key), a list of such, or a list of [cert, key] pairs (key "" when
// the cert file holds it).
func clientPairs(v any) ([][2]string, error) {
	if list, ok := v.([]any); ok {
		var out [][2]string
		for _, e := range list {
			switch e := e.(type) {
			case string:
				if e == "" {
					return nil, errors.New("an empty path")
				}
				out = append(out, [2]string{e, ""})
			case []any:
				pair, err := pathList(e)
				if len(e) == 2 && err != nil {
					// ["cert", ""]: the key in the cert's file
					if c, ok := e[0].(string); ok && c != "" && e[1] == "" {
						out = append(out, [2]string{c, ""})
						continue
					}
				}
				if err != nil || len(pair) != 2 {
					return nil, fmt.Errorf("%v: want [cert, key]", e)
				}
				out = append(out, [2]string{pair[0], pair[1]})
			default:
				return nil, fmt.Errorf("%v: want a path or [cert, key]", e)
			}
		}
		return out, nil
	}
	paths, err := pathList(v)
	if err != nil {
		return nil, err
	}
	var out [][2]string
	for _, p := range paths {
		out = append(out, [2]string{p, ""})
	}
	return out, nil
}

// dockerCerts reads a Docker-style certificates dir: *.crt are CAs,
// *.cert with the *.key of the same name client pairs.
func dockerCerts(dir string) (tlsFiles, error) {
	var t tlsFiles
	entries, err := os.ReadDir(dir)
	if err != nil {
		return t, errmark.Mark(fmt.Errorf("registry certificates %s: %w", dir, err), errdefs.ErrInvalidArgument)
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		switch filepath.Ext(e.Name()) {
		case ".crt":
			t.cas = append(t.cas, p)
		case ".cert":
			key := strings.TrimSuffix(p, ".cert") + ".key"
			if _, err := os.Stat(key); err != nil {
				return t, errmark.Mark(fmt.Errorf("registry certificates %s: %s without its key: %w", dir, e.Name(), err), errdefs.ErrInvalidArgument)
			}
			t.clients = append(t.clients, [2]string{p, key})
		}
	}
	return t, nil
}

// checkHostsDir reads every hosts.toml of dir and the TLS files they name,
// for the warnings of Open: a mistake there fails the pulls of its
// namespace only, and is better told at start than at the first pull.
func checkHostsDir(dir string) []error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // nothing configured yet; it is read at each pull
	}
	if err != nil {
		return []error{hostsErr(dir, "%v", err)}
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		ns := e.Name()
		if h, port, ok := strings.Cut(strings.TrimSuffix(ns, "_"), "_"); ok && strings.HasSuffix(ns, "_") {
			ns = h + ":" + port
		}
		hosts, _, err := readHostsDir(filepath.Join(dir, e.Name()), ns)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, h := range hosts {
			if h.scheme == "http" || h.tls.zero() {
				continue
			}
			if _, _, err := loadTLS(h.tls); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", h.from, err))
			}
		}
	}
	return errs
}
