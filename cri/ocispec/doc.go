// Package ocispec turns the configs of Kubernetes' CRI v1 (a pod sandbox's
// and a container's) into OCI runtime specs for runc: Sandbox for the pause
// process that holds a pod's namespaces, Container for a container that
// joins them.
//
// The functions are pure but for reads of the host (a mount's or device's
// host path, a Localhost seccomp profile, the image's /etc/passwd and
// /etc/group in the rootfs) and one write: like containerd, a bind mount
// whose host path does not exist is created as a directory. A bad config is
// an error wrapping errdefs.ErrInvalidArgument whose text names the field,
// such as "container config: mount[2] host path /x: no such file or
// directory". docs/cri-spec.md has the mapping table.
package ocispec

import (
	"fmt"

	"github.com/containerd/errdefs"

	"github.com/evjournal/containerd/internal/errmark"
)

// Error scopes: which config the field is in.
const (
	sandboxScope   = "sandbox config"
	containerScope = "container config"
)

// fieldError says which field of which config is bad. Its class is
// errdefs.ErrInvalidArgument; the cause stays reachable (errors.Is(err,
// fs.ErrNotExist) for a missing host path).
func fieldError(scope, field string, cause error) error {
	return errmark.Mark(fmt.Errorf("%s: %s: %w", scope, field, cause), errdefs.ErrInvalidArgument)
}

// fieldErrorf is fieldError with a message of its own.
func fieldErrorf(scope, field, format string, args ...any) error {
	return fieldError(scope, field, fmt.Errorf(format, args...))
}
