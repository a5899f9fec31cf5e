// Package oneproc gives a Go program the environment that runs it with one
// P: the daemon's shims and the runc they start are short or idle programs
// whose work is one sequence of steps, for which more Ps only mean more
// threads and hand-offs between CPUs. It imports only strings, so the shim
// stays small.
package oneproc

import "strings"

// Env is env with GOMAXPROCS=1 first, in place of any GOMAXPROCS it had.
func Env(env []string) []string {
	out := make([]string, 1, len(env)+1)
	out[0] = "GOMAXPROCS=1"
	for _, kv := range env {
		if !strings.HasPrefix(kv, "GOMAXPROCS=") {
			out = append(out, kv)
		}
	}
	return out
}
