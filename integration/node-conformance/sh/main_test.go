package main

import "testing"

// The envFrom specs' names (data-1, p-data-1) send the shell to bash; a
// plain environment keeps busybox's ash.
func TestHasNonShellName(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want bool
	}{
		{[]string{"PATH=/bin", "HOME=/root", "_x1=y", "KUBERNETES_PORT_443_TCP=tcp://10.0.0.1:443"}, false},
		{[]string{"PATH=/bin", "data-1=value-1"}, true},
		{[]string{"1-data=v"}, true},
		{[]string{"=v"}, true},
		{[]string{"A.B=v"}, true},
		{nil, false},
	} {
		if got := hasNonShellName(tc.env); got != tc.want {
			t.Errorf("hasNonShellName(%q) = %v, want %v", tc.env, got, tc.want)
		}
	}
}
