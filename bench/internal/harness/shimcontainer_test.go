package harness

import "testing"

// TestShimContainer: a shim's container comes from its working directory,
// live or retired, whatever its command line (a spare's is --spare).
func TestShimContainer(t *testing.T) {
	for _, tc := range []struct{ cwd, want string }{
		{"/s/c1/init", "c1"},
		{"/s/c1/execsync-ab12", "c1"},
		{"/s/.retired/c1.0f3a/e1", "c1"},
		{"/s/.retired/a.b.0f3a/init", "a.b"},
		{"/", ""},
		{"/elsewhere/c1/init", ""},
	} {
		p := Proc{Cwd: tc.cwd, Args: []string{"containerd-shim", "--spare"}}
		if got := ShimContainer("/s", p); got != tc.want {
			t.Errorf("ShimContainer(%q) = %q, want %q", tc.cwd, got, tc.want)
		}
	}
}
