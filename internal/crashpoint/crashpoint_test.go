//go:build failpoints

package crashpoint

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// TestReached: the armed point fires at its Nth hit and only then; other
// points and a malformed setting never fire.
func TestReached(t *testing.T) {
	for _, tc := range []struct {
		env  string
		hits []string
		want int // index in hits of the fatal one, -1: none
	}{
		{"create:after-rootfs", []string{"create:after-dir", "create:after-rootfs", "create:after-rootfs"}, 1},
		{"loop:after-runc-start#2", []string{"loop:after-runc-start", "run-pod:after-start", "loop:after-runc-start"}, 2},
		{"loop:after-runc-start#3", []string{"loop:after-runc-start", "loop:after-runc-start"}, -1},
		{"", []string{"", "create:after-dir"}, -1},
		{"create:after-dir#0", []string{"create:after-dir", "create:after-dir"}, -1},
		{"create:after-dir#x", []string{"create:after-dir"}, -1},
		{"create:after", []string{"create:after-dir"}, -1},
	} {
		a := parse(tc.env)
		got := -1
		for i, p := range tc.hits {
			if a.reached(p) && got < 0 {
				got = i
			}
		}
		if got != tc.want {
			t.Errorf("%q over %q: fires at hit %d, want %d", tc.env, tc.hits, got, tc.want)
		}
	}
}

// TestAtKills: At kills the process itself with SIGKILL at the armed point,
// before the code after it runs; a build's process not armed goes through.
func TestAtKills(t *testing.T) {
	if pts := os.Getenv("CRASHPOINT_TEST_CHILD"); pts != "" {
		for _, p := range strings.Split(pts, ",") {
			At(p)
			os.Stdout.WriteString("passed " + p + "\n")
		}
		os.Exit(0)
	}
	for _, tc := range []struct {
		env, points, out string
		killed           bool
	}{
		{"b", "a,b,c", "passed a\n", true},
		{"a#2", "a,b,a,c", "passed a\npassed b\n", true},
		{"", "a,b", "passed a\npassed b\n", false},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestAtKills$")
		cmd.Env = append(os.Environ(), "CRASHPOINT_TEST_CHILD="+tc.points, Env+"="+tc.env)
		out, err := cmd.Output()
		var ee *exec.ExitError
		killed := errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL
		if killed != tc.killed || string(out) != tc.out {
			t.Errorf("%s=%q over %s: output %q, SIGKILLed %v (%v); want %q, %v", Env, tc.env, tc.points, out, killed, err, tc.out, tc.killed)
		}
	}
}
