package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	criserver "github.com/evjournal/containerd/cri/server"
	"github.com/evjournal/containerd/image"
	"github.com/evjournal/containerd/supervisor"
	"github.com/evjournal/containerd/supervisor/journal"
	"github.com/urfave/cli/v2"
)

// config is the validated command line.
type config struct {
	debug             bool
	logLevel          string
	logFormat         string
	stateDir          string // absolute
	journalDir        string // absolute
	listen            listenAddr
	socketGID         int // -1: leave the socket's group alone
	runtime           string
	runtimeArgs       []string
	shim              string
	runtimeFrom       string // fromFlag if --runtime was given; else chooseBinaries sets it
	shimFrom          string // likewise for --shim
	startTimeout      time.Duration
	retainCount       int
	asideKeep         int
	syncPolicy        journal.SyncPolicy
	reconcileInterval time.Duration
	subscriberBuffer  int
	metricsInterval   time.Duration
	metricsAddress    string
	pprofAddress      string
	graphiteAddress   string
	cri               criConfig
}

// criConfig is the Kubernetes CRI endpoint's part of the flags.
type criConfig struct {
	listen     string // unix socket path; "" = no CRI service
	root       string // persistent dir: images, CRI records
	cniBinDirs []string
	cniConfDir string
	mirrors    map[string][]string // registry host -> endpoints
	insecure   []string            // registry hosts reached over plain http
	pause      string              // the sandboxes' pause binary
	// sandboxImage, when set, is the image the sandboxes run instead of
	// the pause binary.
	sandboxImage string
	limits       image.Limits // what one pull may cost
	// execSyncBudget bounds the ExecSync output held at once.
	execSyncBudget int64
	// cdiSpecDirs are the dirs of CDI specs (nil: ocispec.DefaultCDISpecDirs).
	cdiSpecDirs []string
	// registryHosts is the registry hosts dir (--registry-config-path).
	registryHosts string
	// handlers are the runtime handlers besides the default (as given:
	// their runtimes are found at start).
	handlers []criserver.RuntimeHandler
	// cniConfTemplate is the file UpdateRuntimeConfig makes the pods' CNI
	// config from ("": none).
	cniConfTemplate string
}

// flags are v0.2.9's (docs/api.md section 5: same names, shorts and
// defaults) followed by this daemon's additions.
func flags() []cli.Flag {
	return append([]cli.Flag{
		&cli.BoolFlag{Name: "debug", Usage: "enable debug output in the logs"},
		&cli.StringFlag{Name: "log-level", Usage: "debug, info, warn, error, fatal or panic (overrides --debug)"},
		&cli.StringFlag{Name: "state-dir", Value: "/run/containerd", Usage: "runtime state directory"},
		&cli.DurationFlag{Name: "metrics-interval", Value: 5 * time.Minute, Usage: "interval for logging metrics (0 disables)"},
		&cli.StringFlag{Name: "listen", Aliases: []string{"l"}, Value: "unix:///run/containerd/containerd.sock",
			Usage: "proto://address of the gRPC API (unix://PATH, tcp://HOST:PORT, fd://[N])"},
		&cli.StringFlag{Name: "runtime", Aliases: []string{"r"}, Value: "runc", Usage: "default OCI runtime binary (name or path; the default is looked for beside this daemon's executable, then on PATH)"},
		&cli.StringSliceFlag{Name: "runtime-args", Usage: "global argument for every runtime call (repeatable)"},
		&cli.StringFlag{Name: "shim", Value: "containerd-shim", Usage: "shim binary (name or path; the default is looked for beside this daemon's executable, then on PATH)"},
		&cli.StringFlag{Name: "pprof-address", Usage: "serve Go pprof and expvar over HTTP on this address (unauthenticated)"},
		&cli.DurationFlag{Name: "start-timeout", Value: 30 * time.Second, Usage: "how long a new process may take to start"},
		&cli.IntFlag{Name: "retain-count", Value: 500, Usage: "number of recent events the journal keeps (0 or less: all)"},
		&cli.IntFlag{Name: "aside-keep", Value: supervisor.DefaultAsideKeep, Usage: "state dirs set aside under <state-dir>/.aside " +
			"(unloadable, or half-deleted by a crash) kept for inspection, the newest; older ones are removed at start-up (0 or less: all kept)"},
		&cli.StringFlag{Name: "graphite-address", Usage: "accepted for compatibility; graphite is not supported"},
		&cli.StringFlag{Name: "journal-sync", Value: "batch", Usage: "when the event journal is fsynced: always, batch or none"},
		&cli.StringFlag{Name: "journal-dir", Usage: "event journal directory, on persistent storage (default " + defaultJournalDir +
			" for the default --state-dir, " + journalRoot + "/journal-<state dir>-<hash> for another, so that two daemons never share one)"},
		&cli.IntFlag{Name: "subscriber-buffer", Value: 2048, Usage: "events queued for each event subscriber; one that falls further behind is cut off, told the seq to resume after"},
		&cli.DurationFlag{Name: "reconcile-interval", Value: 10 * time.Second, Usage: "how often container state is checked against the system (0 disables)"},
		&cli.StringFlag{Name: "metrics-address", Usage: "serve metrics in Prometheus text format at http://ADDRESS/metrics (unauthenticated)"},
		&cli.StringFlag{Name: "socket-group", Usage: "group (name or gid) that owns the unix socket. " +
			"Its members are root-equivalent: a request can name any program as the runtime, run as uid 0"},
		&cli.StringFlag{Name: "log-format", Value: "text", Usage: "log format: text or json"},
		&cli.StringFlag{Name: "cri-listen", Usage: "serve the Kubernetes CRI v1 (RuntimeService, ImageService) on this unix socket (mode 0660, --socket-group); off when empty"},
		&cli.StringFlag{Name: "root", Usage: "persistent directory of the CRI service: images and pod/container records (default " + journalRoot +
			" for the default --state-dir, " + journalRoot + "/root-<state dir>-<hash> for another)"},
		&cli.StringSliceFlag{Name: "cni-bin-dir", Value: cli.NewStringSlice("/usr/lib/cni"), Usage: "directory of CNI plugin binaries (repeatable)"},
		&cli.StringFlag{Name: "cni-conf-dir", Value: "/etc/cni/net.d", Usage: "directory of CNI network configs; the first (lexically) is the pods' network"},
		&cli.StringSliceFlag{Name: "registry-mirror", Usage: "HOST=ENDPOINT: pull images of registry HOST through ENDPOINT first (e.g. registry.k8s.io=http://127.0.0.1:5000; repeatable, tried in order)"},
		&cli.StringSliceFlag{Name: "insecure-registry", Usage: "registry HOST reached over plain http (repeatable)"},
		&cli.StringFlag{Name: "sandbox-pause", Usage: "the pause binary of pod sandboxes (default: pause next to this daemon's executable)"},
		&cli.StringSliceFlag{Name: "cri-runtime-handler", Usage: runtimeHandlerUsage},
		&cli.StringFlag{Name: "cni-conf-template", Usage: "a Go text/template of the pods' CNI config: written to <cni-conf-dir>/" + criserver.CNIConfFile +
			" when kubelet sends the node's pod CIDR (.PodCIDR, .PodCIDRRanges, .Routes) and no CNI config is loaded"},
		&cli.StringFlag{Name: "sandbox-image", Usage: "run pod sandboxes from this image (its entrypoint and cmd; pulled when missing, reported pinned) instead of the pause binary"},
	}, append(imageFlags(), append(execSyncFlags(), cdiFlags()...)...)...)
}

// configFrom validates the flags. Every problem is an error here, before the
// daemon touches anything.
func configFrom(c *cli.Context) (config, error) {
	cfg := config{
		debug:             c.Bool("debug"),
		logLevel:          c.String("log-level"),
		logFormat:         c.String("log-format"),
		runtime:           c.String("runtime"),
		runtimeArgs:       c.StringSlice("runtime-args"),
		shim:              c.String("shim"),
		startTimeout:      c.Duration("start-timeout"),
		retainCount:       c.Int("retain-count"),
		asideKeep:         c.Int("aside-keep"),
		reconcileInterval: c.Duration("reconcile-interval"),
		subscriberBuffer:  c.Int("subscriber-buffer"),
		metricsInterval:   c.Duration("metrics-interval"),
		metricsAddress:    c.String("metrics-address"),
		pprofAddress:      c.String("pprof-address"),
		graphiteAddress:   c.String("graphite-address"),
	}
	if c.IsSet("runtime") {
		cfg.runtimeFrom = fromFlag
	}
	if c.IsSet("shim") {
		cfg.shimFrom = fromFlag
	}
	var err error
	if cfg.stateDir, err = stateDirFlag(c.String("state-dir")); err != nil {
		return cfg, err
	}
	if cfg.journalDir, err = journalDirFlag(c.String("journal-dir"), cfg.stateDir); err != nil {
		return cfg, err
	}
	if cfg.listen, err = parseListen(c.String("listen")); err != nil {
		return cfg, err
	}
	if cfg.socketGID, err = lookupGroup(c.String("socket-group")); err != nil {
		return cfg, err
	}
	if cfg.syncPolicy, err = journal.ParseSyncPolicy(c.String("journal-sync")); err != nil {
		return cfg, fmt.Errorf("--journal-sync: %w", err)
	}
	if cfg.cri, err = criConfigFrom(c, cfg.stateDir); err != nil {
		return cfg, err
	}
	return cfg, cfg.check()
}

// check rejects values no component could work with.
func (cfg config) check() error {
	switch {
	case cfg.logFormat != "text" && cfg.logFormat != "json":
		return fmt.Errorf("--log-format %q: want text or json", cfg.logFormat)
	case cfg.runtime == "":
		return fmt.Errorf("--runtime cannot be empty")
	case cfg.shim == "":
		return fmt.Errorf("--shim cannot be empty")
	case cfg.startTimeout <= 0:
		return fmt.Errorf("--start-timeout %s: must be positive", cfg.startTimeout)
	case cfg.metricsInterval < 0:
		return fmt.Errorf("--metrics-interval %s: must not be negative", cfg.metricsInterval)
	case cfg.reconcileInterval < 0:
		return fmt.Errorf("--reconcile-interval %s: must not be negative", cfg.reconcileInterval)
	case cfg.subscriberBuffer < 1:
		return fmt.Errorf("--subscriber-buffer %d: must be at least 1", cfg.subscriberBuffer)
	}
	return nil
}

// stateDirFlag makes the state dir absolute: shims run with other working
// directories, and v0.2 clients pass relative paths.
func stateDirFlag(dir string) (string, error) {
	if dir == "" {
		return "", fmt.Errorf("--state-dir cannot be empty")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("--state-dir %q: %w", dir, err)
	}
	return abs, nil
}

// The journal's default places: persistent, unlike the state dir (/run is a
// tmpfs on systemd hosts), so that history survives a reboot.
const (
	defaultStateDir   = "/run/containerd"
	journalRoot       = "/var/lib/containerd"
	defaultJournalDir = journalRoot + "/journal"
)

// journalDirFlag makes --journal-dir absolute, or derives it from the state
// dir: defaultJournalDir for the default state dir, and for any other a
// directory of its own named after it (Docker runs a daemon of its own with
// its own state dir beside the system one: their journals must differ).
func journalDirFlag(dir, stateDir string) (string, error) {
	if dir == "" {
		return derivedJournalDir(stateDir), nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("--journal-dir %q: %w", dir, err)
	}
	return abs, nil
}

// derivedJournalDir is journalRoot/journal-<state dir with / as ->-<8 hex of
// its SHA-256>: readable, and unique although "/a-b" and "/a/b" read alike.
func derivedJournalDir(stateDir string) string {
	return derivedDir(stateDir, defaultJournalDir, "journal")
}

// derivedDir is dflt for the default state dir, else
// journalRoot/<kind>-<state dir with / as ->-<8 hex of its SHA-256>.
func derivedDir(stateDir, dflt, kind string) string {
	if stateDir == defaultStateDir {
		return dflt
	}
	name := strings.ReplaceAll(strings.Trim(stateDir, "/"), "/", "-")
	if len(name) > 100 {
		name = name[len(name)-100:]
	}
	sum := sha256.Sum256([]byte(stateDir))
	return filepath.Join(journalRoot, kind+"-"+name+"-"+hex.EncodeToString(sum[:4]))
}

// lookupGroup resolves --socket-group: "" is -1 (unchanged), a number is a
// gid, anything else a group name.
func lookupGroup(group string) (int, error) {
	if group == "" {
		return -1, nil
	}
	if gid, err := strconv.Atoi(group); err == nil {
		if gid < 0 {
			return 0, fmt.Errorf("--socket-group %d: invalid gid", gid)
		}
		return gid, nil
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		return 0, fmt.Errorf("--socket-group: %w", err)
	}
	return strconv.Atoi(g.Gid)
}

// listenAddr is a parsed --listen value.
type listenAddr struct {
	proto string // "unix", "tcp" or "fd"
	addr  string // path, host:port, or fd spec ("", "*" or a number)
}

func (l listenAddr) String() string { return l.proto + "://" + l.addr }

// parseListen splits proto://address (docs/api.md 1.1). A value without
// "://" is an error, as in v0.2.9.
func parseListen(s string) (listenAddr, error) {
	proto, addr, ok := strings.Cut(s, "://")
	if !ok {
		return listenAddr{}, fmt.Errorf("--listen %q: want proto://address (unix://PATH, tcp://HOST:PORT or fd://[N])", s)
	}
	l := listenAddr{proto: proto, addr: addr}
	switch proto {
	case "unix":
		if addr == "" {
			return l, fmt.Errorf("--listen %q: empty socket path", s)
		}
	case "tcp":
		if addr == "" {
			return l, fmt.Errorf("--listen %q: empty address", s)
		}
	case "fd":
		if addr != "" && addr != "*" {
			if n, err := strconv.Atoi(addr); err != nil || n < 3 {
				return l, fmt.Errorf("--listen %q: want fd://, fd://* or fd://N with N >= 3", s)
			}
		}
	default:
		return l, fmt.Errorf("--listen %q: unknown protocol %q (want unix, tcp or fd)", s, proto)
	}
	return l, nil
}
