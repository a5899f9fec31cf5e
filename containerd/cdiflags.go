package main

import (
	"fmt"

	"github.com/evjournal/containerd/cri/ocispec"
	"github.com/urfave/cli/v2"
)

// cdiFlags configure the CDI devices (Container Device Interface) CRI
// containers may ask for.
func cdiFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "cdi-spec-dir", Usage: "directory of CDI specs (JSON or YAML) that resolve the CDI devices containers ask for " +
			"(repeatable; a later one takes precedence for a device both define; default /etc/cdi and /var/run/cdi, as containerd)"},
	}
}

// cdiSpecDirsFrom reads --cdi-spec-dir: absolute paths, nil for the
// defaults (ocispec.DefaultCDISpecDirs).
func cdiSpecDirsFrom(c *cli.Context) ([]string, error) {
	var dirs []string
	for _, d := range c.StringSlice("cdi-spec-dir") {
		if d == "" {
			return nil, fmt.Errorf("--cdi-spec-dir: an empty directory")
		}
		abs, err := absFlag("cdi-spec-dir", d)
		if err != nil {
			return nil, err
		}
		dirs = append(dirs, abs)
	}
	return dirs, nil
}

// newCDI is the CDI resolver of the CRI service.
func newCDI(dirs []string) *ocispec.CDI { return ocispec.NewCDI(dirs) }
