package image

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

func TestParseHostsFile(t *testing.T) {
	const file = "/etc/certs.d/docker.io/hosts.toml"
	hosts, err := parseHostsFile([]byte(`
server = "https://registry-1.docker.io"
ca = "/abs/server-ca.pem"

[host."https://z-first.example.com"]
  capabilities = ["pull"]
  ca = ["a.pem", "/abs/b.pem"]
  client = [["c.cert", "c.key"], ["both.pem", ""]]

[host."http://plain.example.com:5000"]
  capabilities = ["pull", "resolve"]

[host."https://a-last.example.com/v2"]
  client = "client.pem"
  skip_verify = true

[host."https://list.example.com"]
  client = ["one.pem", "two.pem"]
`), file, "docker.io")
	if err != nil {
		t.Fatal(err)
	}
	dir := "/etc/certs.d/docker.io/"
	want := []registryHost{
		{scheme: "https", host: "z-first.example.com", caps: capPull,
			tls: tlsFiles{cas: []string{dir + "a.pem", "/abs/b.pem"}, clients: [][2]string{{dir + "c.cert", dir + "c.key"}, {dir + "both.pem", ""}}}},
		{scheme: "http", host: "plain.example.com:5000", caps: capPull | capResolve},
		{scheme: "https", host: "a-last.example.com", caps: capAll, tls: tlsFiles{clients: [][2]string{{dir + "client.pem", ""}}, skipVerify: true}},
		{scheme: "https", host: "list.example.com", caps: capAll, tls: tlsFiles{clients: [][2]string{{dir + "one.pem", ""}, {dir + "two.pem", ""}}}},
		{scheme: "https", host: "registry-1.docker.io", caps: capAll, mirror: true, tls: tlsFiles{cas: []string{"/abs/server-ca.pem"}}},
	}
	for i := range hosts {
		if i < len(want)-1 {
			// The hosts are mirrors, in file order (not the map's).
			want[i].mirror = true
			if !strings.HasSuffix(hosts[i].from, "("+file+")") {
				t.Errorf("host %d from %q: want the file named", i, hosts[i].from)
			}
		}
		want[i].from = hosts[i].from
	}
	if !reflect.DeepEqual(hosts, want) {
		t.Fatalf("hosts\n got %+v\nwant %+v", hosts, want)
	}
	if hosts[4].from != "server https://registry-1.docker.io ("+file+")" {
		t.Errorf("server from %q", hosts[4].from)
	}

	// No server: the namespace's own host, go-containerregistry's scheme,
	// unless it has TLS settings (https then, even at a local address).
	hosts, err = parseHostsFile([]byte(`[host."https://m.example.com"]`), file, "127.0.0.1:5000")
	if err != nil || len(hosts) != 2 || !reflect.DeepEqual(hosts[1], registryHost{host: "127.0.0.1:5000", caps: capAll, from: "server 127.0.0.1:5000 (" + file + ")"}) {
		t.Fatalf("no server: %+v %v", hosts, err)
	}
	hosts, err = parseHostsFile([]byte(`skip_verify = true`), file, "127.0.0.1:5000")
	if err != nil || len(hosts) != 1 || hosts[0].scheme != "https" || hosts[0].mirror || !hosts[0].tls.skipVerify {
		t.Fatalf("server with skip_verify: %+v %v", hosts, err)
	}
}

func TestParseHostsFileErrors(t *testing.T) {
	for _, c := range []struct{ toml, says string }{
		{`server = "https://r.example.com"` + "\nproxy = \"http://p:8080\"", "proxy: not supported by this daemon"},
		{`[host."https://m"]` + "\n  header = {a = \"b\"}", `host."https://m".header: not supported by this daemon`},
		{`[host."https://m"]` + "\n  override_path = true", "override_path: not supported"},
		{`skip_verfy = true`, "skip_verfy: unknown field"},
		{`[host."https://m"]` + "\n  capabilities = [\"pull\", \"fetch\"]", `host "https://m": capability "fetch"`},
		{`[host."m.example.com"]`, `host "m.example.com": want http(s)://host[:port]`},
		{`[host."ftp://m.example.com"]`, `scheme "ftp"`},
		{`[host."https://m.example.com/us"]`, "a path, query or fragment besides /v2 is not supported"},
		{`[host."http://m.example.com"]` + "\n  ca = \"ca.pem\"", "ca, client or skip_verify on a plain http host"},
		{`ca = 3`, "ca: 3: want a path or a list of paths"},
		{`ca = ["a.pem", 3]`, "ca: 3: want a path"},
		{`client = [["c.cert"]]`, "client: [c.cert]: want [cert, key]"},
		{`client = [["c.cert", "c.key", "x"]]`, "want [cert, key]"},
		{`server = "https://r.example.com" server = 1`, "registry hosts /h/hosts.toml: toml:"},
		{`server = "ftp://r.example.com"`, `server "ftp://r.example.com": scheme "ftp"`},
	} {
		_, err := parseHostsFile([]byte(c.toml), "/h/hosts.toml", "ns.example.com")
		if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "/h/hosts.toml") {
			t.Errorf("%q: %v; want InvalidArgument naming the file, with %q", c.toml, err, c.says)
		}
	}
}

func TestHostDirNames(t *testing.T) {
	for host, want := range map[string][]string{
		"docker.io":            {"docker.io"},
		"127.0.0.1:5000":       {"127.0.0.1_5000_", "127.0.0.1:5000"},
		"registry.example:443": {"registry.example_443_", "registry.example:443"},
	} {
		if got := hostDirNames(host); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", host, got, want)
		}
	}
}

// TestHostsOf: which configuration a registry host gets: its hosts dir
// namespace, else the flags, else _default, else itself.
func TestHostsOf(t *testing.T) {
	dir := t.TempDir()
	write := func(ns, content string) {
		os.MkdirAll(filepath.Join(dir, ns), 0o755)
		if content != "" {
			if err := os.WriteFile(filepath.Join(dir, ns, "hosts.toml"), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("file.example.com", `[host."https://m.file.example.com"]`)
	write("127.0.0.1_5000_", `server = "http://127.0.0.1:5000"`)
	write("_default", `[host."https://default-mirror.example.com"]`)
	write("certs.example.com", "")
	os.WriteFile(filepath.Join(dir, "certs.example.com", "ca.crt"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "certs.example.com", "me.cert"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "certs.example.com", "me.key"), nil, 0o644)
	s := &Store{hostsDir: dir, insec: map[string]bool{"insecure.example.com": true},
		mirror: map[string][]string{"file.example.com": {"http://flag-mirror"}, "flag.example.com": {"http://flag-mirror"},
			"certs.example.com": {"https://certs-mirror"}}}
	hostsOf := func(ns string) string {
		hosts, err := s.hostsOf(ns)
		if err != nil {
			t.Fatalf("%s: %v", ns, err)
		}
		var out []string
		for _, h := range hosts {
			out = append(out, fmt.Sprintf("%s://%s", h.scheme, h.host))
		}
		return strings.Join(out, " ")
	}
	for ns, want := range map[string]string{
		"file.example.com":     "https://m.file.example.com ://file.example.com", // the file, not the flags
		"127.0.0.1:5000":       "http://127.0.0.1:5000",
		"flag.example.com":     "http://flag-mirror ://flag.example.com",
		"insecure.example.com": "http://insecure.example.com",
		"other.example.com":    "https://default-mirror.example.com ://other.example.com",
		"certs.example.com":    "https://certs-mirror https://certs.example.com",
	} {
		if got := hostsOf(ns); got != want {
			t.Errorf("%s: %s, want %s", ns, got, want)
		}
	}
	hosts, _ := s.hostsOf("certs.example.com")
	if want := (tlsFiles{cas: []string{filepath.Join(dir, "certs.example.com", "ca.crt")},
		clients: [][2]string{{filepath.Join(dir, "certs.example.com", "me.cert"), filepath.Join(dir, "certs.example.com", "me.key")}}}); !reflect.DeepEqual(hosts[1].tls, want) {
		t.Errorf("Docker-style certificates: %+v, want %+v", hosts[1].tls, want)
	}
	// No hosts dir: the flags, or the host itself.
	s.hostsDir = ""
	if got := hostsOf("file.example.com"); got != "http://flag-mirror ://file.example.com" {
		t.Errorf("without a hosts dir: %s", got)
	}
	if got := hostsOf("other.example.com"); got != "://other.example.com" {
		t.Errorf("without a hosts dir: %s", got)
	}
	// A broken file fails the pulls of its namespace only.
	s.hostsDir = dir
	write("broken.example.com", `server = `)
	if _, err := s.hostsOf("broken.example.com"); !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), filepath.Join(dir, "broken.example.com", "hosts.toml")) {
		t.Errorf("broken hosts.toml: %v", err)
	}
}

// TestCheckHostsDir: what Open warns of: each hosts.toml that does not
// parse and each TLS file that cannot be read, by file; a dir that does
// not exist yet is not a mistake.
func TestCheckHostsDir(t *testing.T) {
	dir := t.TempDir()
	if errs := checkHostsDir(filepath.Join(dir, "absent")); errs != nil {
		t.Fatalf("a hosts dir not made yet: %v", errs)
	}
	for ns, content := range map[string]string{
		"good.example.com":  `[host."https://m.example.com"]`,
		"typo.example.com":  `skip_verfy = true`,
		"127.0.0.1_5000_":   `ca = "gone.pem"`,
		"certs.example.com": "",
	} {
		os.MkdirAll(filepath.Join(dir, ns), 0o755)
		if content != "" {
			os.WriteFile(filepath.Join(dir, ns, "hosts.toml"), []byte(content), 0o644)
		}
	}
	os.WriteFile(filepath.Join(dir, "stray-file"), nil, 0o644)
	errs := checkHostsDir(dir)
	var got []string
	for _, err := range errs {
		got = append(got, err.Error())
	}
	all := strings.Join(got, "\n")
	if len(errs) != 2 || !strings.Contains(all, filepath.Join(dir, "typo.example.com", "hosts.toml")+": skip_verfy: unknown field") ||
		!strings.Contains(all, "server 127.0.0.1:5000 ("+filepath.Join(dir, "127.0.0.1_5000_", "hosts.toml")+"): TLS file "+filepath.Join(dir, "127.0.0.1_5000_", "gone.pem")) {
		t.Fatalf("warnings:\n%s\nwant the typo and the missing CA, by file", all)
	}
}
