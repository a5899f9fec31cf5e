package journal

import (
	"fmt"
	"strings"
)

// SyncPolicy says when appended events are fsynced to disk.
type SyncPolicy int

// The zero value is SyncBatch so that an unset Options field gets group
// commit: durable before publication, one fsync per loop batch.
const (
	// SyncBatch fsyncs once per Commit when something was appended since the last one.
	SyncBatch SyncPolicy = iota
	// SyncAlways fsyncs every record inside Append.
	SyncAlways
	// SyncNone never fsyncs: a process crash loses nothing, a power loss may.
	SyncNone
)

var syncPolicyNames = map[SyncPolicy]string{
	SyncBatch:  "batch",
	SyncAlways: "always",
	SyncNone:   "none",
}

// String returns the name ParseSyncPolicy accepts.
func (p SyncPolicy) String() string {
	if name, ok := syncPolicyNames[p]; ok {
		return name
	}
	return fmt.Sprintf("SyncPolicy(%d)", int(p))
}

// ParseSyncPolicy parses "always", "batch" or "none" (case-insensitive, as
// given on the command line).
func ParseSyncPolicy(s string) (SyncPolicy, error) {
	want := strings.ToLower(strings.TrimSpace(s))
	for p, name := range syncPolicyNames {
		if name == want {
			return p, nil
		}
	}
	return 0, fmt.Errorf("sync policy %q (want always, batch or none): %w", s, ErrInvalidArgument)
}

// valid reports whether p is one of the defined policies.
func (p SyncPolicy) valid() bool {
	_, ok := syncPolicyNames[p]
	return ok
}
