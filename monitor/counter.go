package monitor

import (
	"bytes"
	"strconv"
)

// oomKillKey names the kill counter in both cgroup v1 memory.oom_control and
// cgroup v2 memory.events (kernel 4.13 and later).
const oomKillKey = "oom_kill"

// parseCounter finds "key value" in a flat-keyed cgroup file and returns the
// value. ok is false when the key is missing or its value is not a number,
// e.g. a file read while being rewritten.
func parseCounter(data []byte, key string) (v uint64, ok bool) {
	for line := range bytes.Lines(data) {
		k, val, found := bytes.Cut(bytes.TrimSpace(line), []byte(" "))
		if !found || string(k) != key {
			continue
		}
		n, err := strconv.ParseUint(string(bytes.TrimSpace(val)), 10, 64)
		return n, err == nil
	}
	return 0, false
}

// counter remembers the last oom_kill value read. The kernel wakes us for
// more than kills (v1: every OOM condition, repeatedly while it lasts, and
// cgroup removal; v2: any change of memory.events), so "a kill happened" is
// decided only by the count going up. Kills counted between two reads give
// one report: the consumer learns "OOM-killed", not a tally.
type counter struct {
	last uint64
}

// update records now and reports whether it is above the previous value. A
// lower value (a counter that restarted) becomes the new baseline silently.
func (c *counter) update(now uint64) bool {
	up := now > c.last
	c.last = now
	return up
}
