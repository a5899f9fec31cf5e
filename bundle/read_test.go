package bundle

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
)

// TestReadConfigBounded: a config.json that would stall or swamp the
// daemon is refused at once with an error naming the file and the reason;
// a symlink to a regular file is read.
func TestReadConfigBounded(t *testing.T) {
	good := readTestdata(t, "config-1.0.0-rc2.json")
	tests := []struct {
		name  string
		setup func(path string) error
		want  string // "" = success
		class error
	}{
		{"regular", func(p string) error { return os.WriteFile(p, good, 0o644) }, "", nil},
		{"symlink to regular", func(p string) error {
			target := filepath.Join(filepath.Dir(p), "real.json")
			if err := os.WriteFile(target, good, 0o644); err != nil {
				return err
			}
			return os.Symlink(target, p)
		}, "", nil},
		{"missing", func(string) error { return nil }, "config.json: no such file or directory", errdefs.ErrNotFound},
		{"fifo", func(p string) error { return unix.Mkfifo(p, 0o600) }, "config.json: not a regular file (p---------)", errdefs.ErrInvalidArgument},
		{"symlink to /dev/zero", func(p string) error { return os.Symlink("/dev/zero", p) }, "config.json: not a regular file (Dc---------)", errdefs.ErrInvalidArgument},
		{"directory", func(p string) error { return os.Mkdir(p, 0o700) }, "config.json: not a regular file (d---------)", errdefs.ErrInvalidArgument},
		{"oversized", func(p string) error {
			return os.WriteFile(p, append(good, make([]byte, MaxConfigSize)...), 0o644)
		}, "config.json: larger than the 4194304-byte limit", errdefs.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, ConfigFile)
			if err := tt.setup(path); err != nil {
				t.Fatal(err)
			}
			cfg, err := readWithin(t, dir, 5*time.Second)
			switch {
			case tt.want == "" && (err != nil || cfg.Version != "1.0.0-rc2-dev"):
				t.Fatalf("ReadConfig: %+v, %v", cfg, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !errorsIs(err, tt.class)):
				t.Fatalf("ReadConfig: %v; want %v containing %q", err, tt.class, tt.want)
			}
		})
	}
}

func errorsIs(err, class error) bool {
	return errdefs.IsNotFound(err) && class == errdefs.ErrNotFound ||
		errdefs.IsInvalidArgument(err) && class == errdefs.ErrInvalidArgument
}

// readWithin fails the test if ReadConfig blocks (a FIFO with no writer).
func readWithin(t *testing.T, dir string, d time.Duration) (*Config, error) {
	type result struct {
		cfg *Config
		err error
	}
	done := make(chan result, 1)
	go func() {
		cfg, err := ReadConfig(dir)
		done <- result{cfg, err}
	}()
	select {
	case r := <-done:
		return r.cfg, r.err
	case <-time.After(d):
		t.Fatalf("ReadConfig(%s) still blocked after %v", dir, d)
		return nil, nil
	}
}

func TestReadConfigRelativeBundle(t *testing.T) {
	if _, err := ReadConfig("rel/bundle"); !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), `bundle path "rel/bundle" is not absolute`) {
		t.Fatalf("ReadConfig: %v", err)
	}
}
