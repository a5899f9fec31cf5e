package oneproc

import (
	"slices"
	"testing"
)

// TestEnv: one GOMAXPROCS=1, whatever env had, and the rest of env kept in
// order.
func TestEnv(t *testing.T) {
	for _, env := range [][]string{
		{"PATH=/bin", "HOME=/root"},
		{"GOMAXPROCS=8", "PATH=/bin", "HOME=/root"},
		{"PATH=/bin", "GOMAXPROCS=1", "HOME=/root", "GOMAXPROCS="},
	} {
		got := Env(env)
		if want := []string{"GOMAXPROCS=1", "PATH=/bin", "HOME=/root"}; !slices.Equal(got, want) {
			t.Errorf("Env(%q) = %q, want %q", env, got, want)
		}
	}
}
