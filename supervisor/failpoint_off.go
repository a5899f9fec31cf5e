//go:build !failpoints

package supervisor

import "github.com/evjournal/containerd/supervisor/journal"

// adjustJournalOptions lets failpoint tests change the journal's options.
func adjustJournalOptions(o journal.Options) journal.Options { return o }

// crashPoint is a test-only failpoint: built with -tags failpoints
// (failpoint.go, which `make test` uses) it freezes the supervisor after a
// given number of journaled events, as if the daemon died right then. In the
// daemon it is empty and its calls compile to nothing.
type crashPoint struct{}

func (*crashPoint) afterAppend() {}

func (*crashPoint) frozen() bool { return false }
