package runtime

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/containerd/errdefs"
)

// ValidateStdio checks the client's stdio paths before anything is made, so
// that a create or exec naming a host file fails at once with
// ErrInvalidArgument naming the field, and changes nothing on disk. The
// shim, which runs as root, enforces the same rules when it opens them
// (docs/api.md 3.2, "Stdio paths"):
//
//   - stdout, stderr: "" (/dev/null), a FIFO, a character device, or an
//     absolute path that does not exist yet (the shim creates it, 0600,
//     exclusively, not following symlinks). An existing regular file, a
//     symlink or a directory would be written over in place: refused.
//   - stdin: "", or an existing FIFO, character device or regular file,
//     opened read-only; never created.
//   - log path (then stdout and stderr must be ""): "", or an absolute path
//     in an existing directory naming an existing regular file (appended
//     to) or nothing yet (the shim creates it, 0640). A symlink, a
//     directory, a FIFO or a device is refused.
func ValidateStdio(s Stdio) error {
	if err := validateInput(s.Stdin); err != nil {
		return err
	}
	if err := validateLog(s); err != nil {
		return err
	}
	for _, o := range []struct{ field, path string }{{"stdout", s.Stdout}, {"stderr", s.Stderr}} {
		if err := validateOutput(o.field, o.path); err != nil {
			return err
		}
	}
	return nil
}

func validateOutput(field, path string) error {
	if path == "" {
		return nil
	}
	if !filepath.IsAbs(path) {
		return stdioError(field, path, "is not an absolute path")
	}
	st, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("%s %q: %v: %w", field, path, err, errdefs.ErrInvalidArgument)
	case st.Mode()&(fs.ModeNamedPipe|fs.ModeCharDevice) != 0:
		return nil
	}
	return stdioError(field, path, "is "+kindOf(st.Mode())+"; an output must be a FIFO, a character device or a path that does not exist yet")
}

// validateLog checks the log path of s (see ValidateStdio). Create and
// Exec check it too, before anything is made: a CRI client may not call
// ValidateStdio first.
func validateLog(s Stdio) error {
	if s.LogPath == "" {
		return nil
	}
	if s.Stdout != "" || s.Stderr != "" {
		return fmt.Errorf("log path %q with stdout %q and stderr %q: stdout and stderr must be empty when a log path is set: %w",
			s.LogPath, s.Stdout, s.Stderr, errdefs.ErrInvalidArgument)
	}
	if !filepath.IsAbs(s.LogPath) {
		return stdioError("log path", s.LogPath, "is not an absolute path")
	}
	st, err := os.Lstat(s.LogPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return validateLogDir(s.LogPath)
	case err != nil:
		return fmt.Errorf("log path %q: %v: %w", s.LogPath, err, errdefs.ErrInvalidArgument)
	case st.Mode().IsRegular():
		return nil
	}
	return stdioError("log path", s.LogPath, "is "+kindOf(st.Mode())+"; a log path must be a regular file or not exist yet")
}

// validateLogDir: the directory of a log path that does not exist yet must
// (kubelet makes the pod's log dir before it creates the container).
func validateLogDir(path string) error {
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return stdioError("log path", path, "is in a directory that does not exist ("+dir+")")
	case err != nil:
		return fmt.Errorf("log path %q: %v: %w", path, err, errdefs.ErrInvalidArgument)
	case !st.IsDir():
		return stdioError("log path", path, "is in "+dir+", which is not a directory")
	}
	return nil
}

func validateInput(path string) error {
	if path == "" {
		return nil
	}
	if !filepath.IsAbs(path) {
		return stdioError("stdin", path, "is not an absolute path")
	}
	st, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("stdin %q: %v: %w", path, err, errdefs.ErrInvalidArgument)
	}
	if st.Mode()&(fs.ModeNamedPipe|fs.ModeCharDevice) != 0 || st.Mode().IsRegular() {
		return nil
	}
	return stdioError("stdin", path, "is "+kindOf(st.Mode())+"; stdin must be a FIFO, a character device or a regular file")
}

func stdioError(field, path, what string) error {
	return fmt.Errorf("%s %q %s: %w", field, path, what, errdefs.ErrInvalidArgument)
}

// kindOf names a file type for an error message.
func kindOf(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "an existing regular file"
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "a " + m.Type().String() + " file"
}
