package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	criserver "github.com/evjournal/containerd/cri/server"
	"github.com/evjournal/containerd/image"
	"github.com/evjournal/containerd/supervisor/journal"
	"github.com/urfave/cli/v2"
)

// parseFlags runs the daemon's flag parsing on args without starting it.
func parseFlags(args ...string) (config, error) {
	var cfg config
	app := newApp()
	app.Action = func(c *cli.Context) error {
		var err error
		cfg, err = configFrom(c)
		return err
	}
	err := app.Run(append([]string{"containerd"}, args...))
	return cfg, err
}

func TestDefaults(t *testing.T) {
	cfg, err := parseFlags()
	if err != nil {
		t.Fatal(err)
	}
	want := config{
		logFormat: "text", stateDir: "/run/containerd", journalDir: "/var/lib/containerd/journal",
		listen:    listenAddr{proto: "unix", addr: "/run/containerd/containerd.sock"},
		socketGID: -1, runtime: "runc", shim: "containerd-shim", startTimeout: 30 * time.Second,
		retainCount: 500, asideKeep: 50, syncPolicy: journal.SyncBatch, reconcileInterval: 10 * time.Second,
		subscriberBuffer: 2048, metricsInterval: 5 * time.Minute,
		cri: criConfig{root: "/var/lib/containerd", cniBinDirs: []string{"/usr/lib/cni"}, cniConfDir: "/etc/cni/net.d", mirrors: map[string][]string{},
			limits: image.DefaultLimits, execSyncBudget: criserver.DefaultExecOutputBudget},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("defaults\n got %+v\nwant %+v", cfg, want)
	}
}

func TestFlags(t *testing.T) {
	wd, _ := os.Getwd()
	cfg, err := parseFlags("--debug", "--log-level", "warn", "--state-dir", "rel/state", "-l", "tcp://127.0.0.1:0",
		"-r", "crun", "--runtime-args", "--root=/a,b", "--runtime-args", "--debug", "--shim", "/bin/shim",
		"--start-timeout", "5s", "--retain-count", "0", "--journal-sync", "always", "--reconcile-interval", "0",
		"--metrics-interval", "0m0s", "--metrics-address", ":9100", "--pprof-address", "127.0.0.1:6060",
		"--socket-group", "0", "--log-format", "json", "-graphite-address", "g:2003", "--journal-dir", "rel/journal",
		"--subscriber-buffer", "64", "--cri-listen", "unix://rel/cri.sock", "--root", "rel/root", "--cni-bin-dir", "/a",
		"--cni-bin-dir", "/b", "--cni-conf-dir", "/c", "--registry-mirror", "registry.k8s.io=http://127.0.0.1:5000",
		"--registry-mirror", "registry.k8s.io=http://m2", "--registry-mirror", "docker.io=http://m3", "--insecure-registry", "r:5000",
		"--sandbox-pause", "rel/pause", "--aside-keep", "3")
	if err != nil {
		t.Fatal(err)
	}
	want := config{
		debug: true, logLevel: "warn", logFormat: "json", stateDir: filepath.Join(wd, "rel/state"),
		journalDir: filepath.Join(wd, "rel/journal"),
		listen:     listenAddr{proto: "tcp", addr: "127.0.0.1:0"}, socketGID: 0, runtime: "crun",
		runtimeArgs: []string{"--root=/a,b", "--debug"}, shim: "/bin/shim", runtimeFrom: fromFlag, shimFrom: fromFlag, startTimeout: 5 * time.Second,
		retainCount: 0, asideKeep: 3, syncPolicy: journal.SyncAlways, metricsAddress: ":9100", pprofAddress: "127.0.0.1:6060",
		graphiteAddress: "g:2003", subscriberBuffer: 64,
		cri: criConfig{listen: filepath.Join(wd, "rel/cri.sock"), root: filepath.Join(wd, "rel/root"), cniBinDirs: []string{"/a", "/b"},
			cniConfDir: "/c", mirrors: map[string][]string{"registry.k8s.io": {"http://127.0.0.1:5000", "http://m2"}, "docker.io": {"http://m3"}},
			insecure: []string{"r:5000"}, pause: filepath.Join(wd, "rel/pause"), limits: image.DefaultLimits, execSyncBudget: criserver.DefaultExecOutputBudget},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("flags\n got %+v\nwant %+v", cfg, want)
	}
}

// TestDerivedJournalDir: without --journal-dir, the default state dir gets
// the default journal dir and any other state dir one of its own under the
// same root, so that two daemons (Docker's beside the system one) never
// share a journal.
func TestDerivedJournalDir(t *testing.T) {
	seen := map[string]string{}
	for _, state := range []string{"/run/containerd", "/var/run/docker/libcontainerd/containerd", "/a-b", "/a/b", "/run/containerd/"} {
		cfg, err := parseFlags("--state-dir", state)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Dir(cfg.journalDir) != "/var/lib/containerd" {
			t.Errorf("state dir %s: journal dir %s, want one under /var/lib/containerd", state, cfg.journalDir)
		}
		if other, dup := seen[cfg.journalDir]; dup && other != cfg.stateDir {
			t.Errorf("state dirs %s and %s share the journal dir %s", other, cfg.stateDir, cfg.journalDir)
		}
		seen[cfg.journalDir] = cfg.stateDir
	}
	if cfg, _ := parseFlags("--state-dir", "/run/containerd/"); cfg.journalDir != "/var/lib/containerd/journal" {
		t.Errorf("default state dir: journal dir %s", cfg.journalDir)
	}
	if cfg, _ := parseFlags("--state-dir", "/x", "--journal-dir", "/j"); cfg.journalDir != "/j" {
		t.Errorf("--journal-dir /j: journal dir %s", cfg.journalDir)
	}
}

func TestBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "/run/x.sock"}, "want proto://address"},
		{[]string{"--listen", "udp://x"}, "unknown protocol"},
		{[]string{"--listen", "unix://"}, "empty socket path"},
		{[]string{"--listen", "fd://2"}, "fd://N with N >= 3"},
		{[]string{"--journal-sync", "sometimes"}, "--journal-sync"},
		{[]string{"--log-format", "xml"}, "--log-format"},
		{[]string{"--start-timeout", "0s"}, "must be positive"},
		{[]string{"--start-timeout", "soon"}, "invalid value"},
		{[]string{"--retain-count", "many"}, "invalid value"},
		{[]string{"--runtime", ""}, "--runtime cannot be empty"},
		{[]string{"--state-dir", ""}, "--state-dir cannot be empty"},
		{[]string{"--socket-group", "no-such-group-here"}, "--socket-group"},
		{[]string{"--metrics-interval", "-1s"}, "must not be negative"},
		{[]string{"--subscriber-buffer", "0"}, "--subscriber-buffer 0: must be at least 1"},
		{[]string{"--no-such-flag"}, "flag provided but not defined"},
		{[]string{"extra-arg"}, ""}, // checked by action, below
	}
	for _, tt := range tests[:len(tests)-1] {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := parseFlags(tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
	if err := newApp().Run([]string{"containerd", "extra-arg"}); err == nil || !strings.Contains(err.Error(), "unexpected arguments") {
		t.Fatalf("extra argument: %v", err)
	}
}

func TestParseListen(t *testing.T) {
	tests := []struct {
		in      string
		want    listenAddr
		wantErr bool
	}{
		{"unix:///run/containerd/containerd.sock", listenAddr{"unix", "/run/containerd/containerd.sock"}, false},
		{"unix://rel.sock", listenAddr{"unix", "rel.sock"}, false},
		{"tcp://127.0.0.1:7000", listenAddr{"tcp", "127.0.0.1:7000"}, false},
		{"fd://", listenAddr{"fd", ""}, false},
		{"fd://*", listenAddr{"fd", "*"}, false},
		{"fd://3", listenAddr{"fd", "3"}, false},
		{"fd://x", listenAddr{}, true},
		{"/run/containerd/containerd.sock", listenAddr{}, true},
		{"tcp://", listenAddr{}, true},
		{"http://x", listenAddr{}, true},
	}
	for _, tt := range tests {
		got, err := parseListen(tt.in)
		if (err != nil) != tt.wantErr || (!tt.wantErr && got != tt.want) {
			t.Errorf("parseListen(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestLookupGroup(t *testing.T) {
	for in, want := range map[string]int{"": -1, "0": 0, "1234": 1234, "root": 0} {
		if got, err := lookupGroup(in); err != nil || got != want {
			t.Errorf("lookupGroup(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := lookupGroup("-5"); err == nil {
		t.Error("negative gid accepted")
	}
}

// TestHelpSaysSocketIsRootEquivalent: --help warns that socket access
// (--socket-group) is root-equivalent.
func TestHelpSaysSocketIsRootEquivalent(t *testing.T) {
	app := newApp()
	var out strings.Builder
	app.Writer = &out
	if err := app.Run([]string{"containerd", "--help"}); err != nil {
		t.Fatal(err)
	}
	if strings.Count(out.String(), "root-equivalent") < 2 {
		t.Fatalf("--help does not say (in the description and at --socket-group) that socket access is root-equivalent:\n%s", out.String())
	}
}

// TestBadRegistryMirror: a mirror without HOST=ENDPOINT is refused at start,
// naming the value and the form wanted.
func TestBadRegistryMirror(t *testing.T) {
	for _, v := range []string{"registry.k8s.io", "=http://x", "registry.k8s.io="} {
		_, err := parseFlags("--registry-mirror", v)
		if err == nil || !strings.Contains(err.Error(), v) || !strings.Contains(err.Error(), "HOST=ENDPOINT") {
			t.Errorf("--registry-mirror %q: %v", v, err)
		}
	}
}

// TestSandboxImageFlag: --sandbox-image takes an image reference, and not
// together with --sandbox-pause (the sandboxes run one or the other).
func TestSandboxImageFlag(t *testing.T) {
	cfg, err := parseFlags("--sandbox-image", "registry.k8s.io/pause:3.10")
	if err != nil || cfg.cri.sandboxImage != "registry.k8s.io/pause:3.10" {
		t.Fatalf("--sandbox-image: %q %v", cfg.cri.sandboxImage, err)
	}
	if _, err := parseFlags("--sandbox-image", "Bad Ref!"); err == nil || !strings.Contains(err.Error(), `--sandbox-image "Bad Ref!": not an image reference`) {
		t.Errorf("a bad reference: %v", err)
	}
	if _, err := parseFlags("--sandbox-image", "pause:1", "--sandbox-pause", "/p"); err == nil || !strings.Contains(err.Error(), "give one") {
		t.Errorf("both flags: %v", err)
	}
}
