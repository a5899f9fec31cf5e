package runtime

import "testing"

// TestSpecVersion: the spec version line of each runtime's --version, as
// they print it; none is "" (taken as today's).
func TestSpecVersion(t *testing.T) {
	for out, want := range map[string]string{
		"runc version 1.5.2\nspec: 1.3.0\ngo: go1.26.8\nlibseccomp: 2.5.4\n":                     "1.3.0",
		"runc version spec: 1.0.0-rc2-dev\n":                                                     "1.0.0-rc2-dev",
		"runc version 1.0.0-rc3\ncommit: 992a5be\nspec: 1.0.0-rc5\n":                             "1.0.0-rc5",
		"crun version 1.14\ncommit: 667e6e\nrundir: /run/crun\nspec: 1.0.0\n+SYSTEMD +SECCOMP\n": "1.0.0",
		"my-runtime 2.0\n":               "",
		"":                               "",
		"inspec: 9\nspec: 1.2.0 extra\n": "",
	} {
		if got := specVersion([]byte(out)); got != want {
			t.Errorf("%q: %q, want %q", out, got, want)
		}
	}
}
