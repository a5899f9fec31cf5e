// Package bundle reads what the daemon needs from a client's OCI bundle:
// the config.json of any runtime-spec version from 1.0.0-rc1 to today's
// 1.x, read once at create, without blocking, bounded in size, and never
// written. What it learns is kept in the daemon's own state (Config), so a
// restart never reads the bundle again (docs/api.md 7.1).
package bundle

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/internal/errmark"
	"golang.org/x/sys/unix"
)

// MaxConfigSize bounds a bundle's config.json. Docker-era configs are a few
// KiB; one with a large seccomp profile stays well under 1 MiB.
const MaxConfigSize = 4 << 20

// ConfigFile is the name of the spec file in a bundle.
const ConfigFile = "config.json"

// ReadConfig reads and decodes <dir>/config.json. dir must be absolute. A
// missing file is ErrNotFound with the text "open <dir>/config.json: no such
// file or directory"; anything else wrong is ErrInvalidArgument naming the
// file and what was wrong with it.
func ReadConfig(dir string) (*Config, error) {
	cfg, _, err := ReadConfigData(dir)
	return cfg, err
}

// ReadConfigData is ReadConfig that also gives the file's bytes, read in
// the same single read, for a translation (Translate).
func ReadConfigData(dir string) (*Config, []byte, error) {
	if dir == "" || !filepath.IsAbs(dir) {
		return nil, nil, fmt.Errorf("bundle path %q is not absolute: %w", dir, errdefs.ErrInvalidArgument)
	}
	path := filepath.Join(dir, ConfigFile)
	data, err := ReadFile(path, MaxConfigSize)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := Decode(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, data, nil
}

// ReadFile reads a file a client named, at most max bytes. It never blocks
// (a FIFO is opened O_NONBLOCK and then refused) and accepts only a regular
// file (a symlink to one is followed), so a client cannot stall a worker
// or make the daemon read /dev/zero. A missing file is ErrNotFound (the
// os error's own text); any other refusal is ErrInvalidArgument.
func ReadFile(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, errmark.Mark(err, errdefs.ErrNotFound)
	case err != nil:
		return nil, errmark.Mark(err, errdefs.ErrInvalidArgument)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, errmark.Mark(err, errdefs.ErrInvalidArgument)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s): %w", path, fi.Mode().Type(), errdefs.ErrInvalidArgument)
	}
	if fi.Size() > max {
		return nil, tooLarge(path, max)
	}
	// The size can grow between the stat and the read: read one byte
	// more than allowed to notice.
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %v: %w", path, err, errdefs.ErrInvalidArgument)
	}
	if int64(len(data)) > max {
		return nil, tooLarge(path, max)
	}
	return data, nil
}

func tooLarge(path string, max int64) error {
	return fmt.Errorf("%s: larger than the %d-byte limit: %w", path, max, errdefs.ErrInvalidArgument)
}
