package runtime

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/evjournal/containerd/bundle"
	"github.com/evjournal/containerd/internal/atomicfile"
)

// writeFileAtomic replaces path with data so that a crash leaves either the
// old content or the new one (internal/atomicfile). Every state file goes
// through here.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	return atomicfile.Write(path, data, perm)
}

// syncDir makes the renames and creations in dir durable.
func syncDir(dir string) error { return atomicfile.SyncDir(dir) }

// writeJSON saves v as indented JSON through writeFileAtomic, mode 0600.
func writeJSON(path string, v any) error { return writeJSONWith(writeFileAtomic, path, v) }

// writeJSONWith saves v as indented JSON through write, mode 0600.
func writeJSONWith(write func(string, []byte, os.FileMode) error, path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return write(path, data, 0o600)
}

// Bounds on the reads of the daemon's own state files. A damaged state dir
// (a file swapped for a FIFO, /dev/zero or a huge file) must not hang or
// exhaust the daemon at restart: every state file is read with
// bundle.ReadFile (regular files only, non-blocking, bounded).
const (
	maxStateFile = 16 << 20 // state.json holds the bundle's config (4 MiB at most)
	maxNumFile   = 64       // a pid, a start time, an exit status
)

// readJSON loads path into v; the error names the file.
func readJSON(path string, v any) error {
	data, err := bundle.ReadFile(path, maxStateFile)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: invalid JSON: %w", path, err)
	}
	return nil
}

// readUint reads a file holding one decimal number (surrounding space allowed).
func readUint(path string) (uint64, error) {
	data, err := bundle.ReadFile(path, maxNumFile)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// readPid is readUint for a pid file: 0 with no error when the file is absent.
func readPid(path string) (int, error) {
	n, err := readUint(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err == nil && (n == 0 || n > 1<<22) {
		return 0, fmt.Errorf("%s: %d is not a pid", path, n)
	}
	return int(n), err
}

// readOptionalUint is readUint with 0 for an absent file.
func readOptionalUint(path string) (uint64, error) {
	n, err := readUint(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	return n, err
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// randomHex returns n random bytes as hex, for incarnations.
func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // never fails on Linux
	}
	return hex.EncodeToString(b)
}
