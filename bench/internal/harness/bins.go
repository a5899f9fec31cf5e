// Package harness is what the benchmarks (bench/cmd/bench) and the
// reliability suite (bench/reliability) share: the binaries, bundles, a
// daemon on a private state dir, bare runc on a private root, /proc
// readings and small statistics. Unlike integration/fixture it takes no
// testing.TB, so a plain program can use it; everything it starts is
// registered with an Env and removed by Env.Close, even after a failure.
package harness

import (
	"fmt"
	"os"
	"path/filepath"
)

// Bins are the binaries under test, all absolute paths.
type Bins struct {
	Containerd, Shim, Runc, Testinit, Ctr string
	// Pause is the CRI pods' pause binary (--sandbox-pause).
	Pause string
}

// FindBins returns the binaries of bin/ in the repository holding the
// working directory, or those named by $CONTAINERD, $SHIM, $RUNC, $TESTINIT,
// $CTR and $PAUSE. It does not build anything: `make build` does.
func FindBins() (Bins, error) {
	root, err := RepoRoot()
	if err != nil {
		return Bins{}, err
	}
	pick := func(env, name string) (string, error) {
		p := os.Getenv(env)
		if p == "" {
			p = filepath.Join(root, "bin", name)
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", err
		}
		if _, err := os.Stat(abs); err != nil {
			return "", fmt.Errorf("%s: %w (run `make build`)", name, err)
		}
		return abs, nil
	}
	var b Bins
	for _, x := range []struct {
		dst       *string
		env, name string
	}{
		{&b.Containerd, "CONTAINERD", "containerd"}, {&b.Shim, "SHIM", "containerd-shim"},
		{&b.Runc, "RUNC", "runc"}, {&b.Testinit, "TESTINIT", "testinit"}, {&b.Ctr, "CTR", "ctr"}, {&b.Pause, "PAUSE", "pause"},
	} {
		if *x.dst, err = pick(x.env, x.name); err != nil {
			return Bins{}, err
		}
	}
	return b, nil
}

// RepoRoot is the directory holding go.mod above the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}
