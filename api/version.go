package api

import "fmt"

// The version GetServerVersion reports. The API is the containerd v0.2.9 API
// (docs/api.md 3.1), so the daemon reports that release rather than v0.2.9's
// stale 0.2.3 constant (docs/api.md 9.7).
const (
	VersionMajor = 0
	VersionMinor = 2
	VersionPatch = 9
)

// Revision is the git commit the binaries were built from. The Makefile sets it:
//
//	go build -ldflags "-X github.com/evjournal/containerd/api.Revision=$(git rev-parse --short HEAD)"
//
// It stays empty when not set.
var Revision string

// Version returns "M.m.p", plus " commit: REV" when Revision is set: the
// string the binaries print for --version.
func Version() string {
	v := fmt.Sprintf("%d.%d.%d", VersionMajor, VersionMinor, VersionPatch)
	if Revision != "" {
		v += " commit: " + Revision
	}
	return v
}
