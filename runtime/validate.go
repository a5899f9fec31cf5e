package runtime

import (
	"fmt"

	"github.com/containerd/errdefs"
)

// MaxIDLength bounds container ids, exec ids and checkpoint names, so a path
// built from one stays well under NAME_MAX with the suffixes this package adds
// (".<incarnation>", ".<time>").
const MaxIDLength = 76

// ValidateID checks a container id, exec id or checkpoint name before any path
// is built from it: non-empty, at most MaxIDLength bytes, only [A-Za-z0-9_.-],
// not starting with '.' (which rules out ".", ".." and hidden names such as
// ".retired") nor with '-' (runc would parse it as a flag). The error is
// classified errdefs.ErrInvalidArgument.
func ValidateID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("invalid id: empty: %w", errdefs.ErrInvalidArgument)
	case len(id) > MaxIDLength:
		return fmt.Errorf("invalid id %.20q...: longer than %d bytes: %w", id, MaxIDLength, errdefs.ErrInvalidArgument)
	case id[0] == '.':
		return fmt.Errorf("invalid id %q: starts with '.': %w", id, errdefs.ErrInvalidArgument)
	case id[0] == '-':
		// runc would take it for a flag.
		return fmt.Errorf("invalid id %q: starts with '-': %w", id, errdefs.ErrInvalidArgument)
	}
	for i := 0; i < len(id); i++ {
		if !idByte(id[i]) {
			return fmt.Errorf("invalid id %q: byte %q not in [A-Za-z0-9_.-]: %w", id, id[i], errdefs.ErrInvalidArgument)
		}
	}
	return nil
}

func idByte(b byte) bool {
	switch {
	case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9':
		return true
	}
	return b == '_' || b == '.' || b == '-'
}
