package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/urfave/cli/v2"
)

// criConfigFrom reads the CRI flags. Nothing is checked on disk here but
// what a typo would break (paths made absolute, mirror syntax).
func criConfigFrom(c *cli.Context, stateDir string) (criConfig, error) {
	cc := criConfig{listen: c.String("cri-listen"), cniBinDirs: c.StringSlice("cni-bin-dir"), cniConfDir: c.String("cni-conf-dir"),
		insecure: c.StringSlice("insecure-registry"), pause: c.String("sandbox-pause")}
	var err error
	if cc.listen != "" {
		if cc.listen, err = absFlag("cri-listen", strings.TrimPrefix(cc.listen, "unix://")); err != nil {
			return cc, err
		}
	}
	if cc.root = c.String("root"); cc.root == "" {
		cc.root = derivedRoot(stateDir)
	} else if cc.root, err = absFlag("root", cc.root); err != nil {
		return cc, err
	}
	if cc.mirrors, err = parseMirrors(c.StringSlice("registry-mirror")); err != nil {
		return cc, err
	}
	if p := c.String("registry-config-path"); p != "" {
		if cc.registryHosts, err = absFlag("registry-config-path", p); err != nil {
			return cc, err
		}
	}
	if cc.limits, err = imageLimitsFrom(c); err != nil {
		return cc, err
	}
	if cc.execSyncBudget, err = execSyncBudgetFrom(c); err != nil {
		return cc, err
	}
	if cc.cdiSpecDirs, err = cdiSpecDirsFrom(c); err != nil {
		return cc, err
	}
	if cc.handlers, err = parseRuntimeHandlers(c.StringSlice("cri-runtime-handler")); err != nil {
		return cc, err
	}
	if cc.cniConfTemplate = c.String("cni-conf-template"); cc.cniConfTemplate != "" {
		if cc.cniConfTemplate, err = absFlag("cni-conf-template", cc.cniConfTemplate); err != nil {
			return cc, err
		}
	}
	if cc.pause != "" {
		if cc.pause, err = absFlag("sandbox-pause", cc.pause); err != nil {
			return cc, err
		}
	}
	if cc.sandboxImage = c.String("sandbox-image"); cc.sandboxImage != "" {
		if cc.pause != "" {
			return cc, fmt.Errorf("--sandbox-image and --sandbox-pause: give one (the sandboxes run either an image or the pause binary)")
		}
		if _, err := name.ParseReference(cc.sandboxImage); err != nil {
			return cc, fmt.Errorf("--sandbox-image %q: not an image reference: %w", cc.sandboxImage, err)
		}
	}
	return cc, nil
}

// pauseBinary is --sandbox-pause, else the pause next to this executable.
func (cc criConfig) pauseBinary() string {
	if cc.pause != "" {
		return cc.pause
	}
	exe, err := os.Executable()
	if err != nil {
		return "pause"
	}
	return filepath.Join(filepath.Dir(exe), "pause")
}

func absFlag(name, path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("--%s %q: %w", name, path, err)
	}
	return abs, nil
}

// parseMirrors reads HOST=ENDPOINT values, keeping their order per host.
func parseMirrors(values []string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, v := range values {
		host, endpoint, ok := strings.Cut(v, "=")
		if !ok || host == "" || endpoint == "" {
			return nil, fmt.Errorf("--registry-mirror %q: want HOST=ENDPOINT, e.g. registry.k8s.io=http://127.0.0.1:5000", v)
		}
		out[host] = append(out[host], endpoint)
	}
	return out, nil
}

// derivedRoot is the CRI root for a state dir, as the journal's dir is
// derived: two daemons never share one.
func derivedRoot(stateDir string) string { return derivedDir(stateDir, journalRoot, "root") }
