package runtime

import (
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

func TestValidateID(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"a", true},
		{"web-1_x.y", true},
		{"A9", true},
		{strings.Repeat("x", MaxIDLength), true},
		{strings.Repeat("x", MaxIDLength+1), false},
		{strings.Repeat("a", 300), false},
		{"", false},
		{".", false},
		{"..", false},
		{".hidden", false},
		{"-x", false}, // runc would parse it as a flag
		{"x-", true},
		{"../x", false},
		{"a/b", false},
		{"/abs", false},
		{"a\x00b", false},
		{"sp ace", false},
		{"uni\u00e9", false},
		{"a..b", true}, // no separator, so no escape
	} {
		err := ValidateID(tc.id)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateID(%q) = %v, want ok=%v", tc.id, err, tc.ok)
		}
		if err != nil && !errdefs.IsInvalidArgument(err) {
			t.Errorf("ValidateID(%q): %v is not InvalidArgument", tc.id, err)
		}
	}
}

func TestParseRuncError(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want RuncError
	}{
		{"/usr/bin/runc did not terminate successfully: exit status 1: container \"x\" does not exist\n",
			RuncError{Op: "op", Status: 1, Output: "container \"x\" does not exist\n"}},
		{"runc did not terminate successfully: exit status 2: multi\nline: with: colons",
			RuncError{Op: "op", Status: 2, Output: "multi\nline: with: colons"}},
		{"exec: \"runc\": executable file not found in $PATH: <nil>",
			RuncError{Op: "op", Status: -1, Output: "exec: \"runc\": executable file not found in $PATH: <nil>"}},
	} {
		got := parseRuncError("op", errString(tc.in))
		if *got != tc.want {
			t.Errorf("parseRuncError(%q) = %+v, want %+v", tc.in, *got, tc.want)
		}
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func TestRuncErrorClass(t *testing.T) {
	for _, tc := range []struct {
		err   *RuncError
		class error
		text  string
	}{
		{&RuncError{Status: 1, Output: "container \"x\" does not exist\n"}, errdefs.ErrNotFound, `exit status 1: "container \"x\" does not exist\n"`},
		{&RuncError{Status: 1, Output: "container not running\n"}, errdefs.ErrFailedPrecondition, `exit status 1: "container not running\n"`},
		{&RuncError{Status: -1, Output: "fork/exec: no such file"}, errdefs.ErrInternal, "fork/exec: no such file"},
		// Today's runc on stderr, a logrus text line.
		{&RuncError{Status: 1, Output: "time=\"2026-01-01T00:00:00Z\" level=error msg=\"container does not exist\"\n"}, errdefs.ErrNotFound, ""},
		{&RuncError{Status: 1, Output: "time=2026-01-01T00:00:00Z level=error msg=\"container does not exist\"\n"}, errdefs.ErrNotFound, ""},
		// runc 1.0.0-rc2's state and delete.
		{&RuncError{Status: 1, Output: "container \"x\" does not exists\n"}, errdefs.ErrNotFound, ""},
		{&RuncError{Status: 1, Output: "container x is not exist\n"}, errdefs.ErrNotFound, ""},
		// A failed checkpoint quoting CRIU's log: not an unknown container.
		{&RuncError{Status: 1, Output: "criu failed: type NOTIFY errno 0\nlog file: /cp/criu.work/dump.log\n" +
			"Error (criu/files-reg.c:1710): Can't dump ghost file /tmp/x: the path /tmp/x does not exist\n"}, errdefs.ErrFailedPrecondition, ""},
		{&RuncError{Status: 1, Output: "time=\"2026-01-01T00:00:00Z\" level=error msg=\"open /b/rootfs/mnt: mount source does not exist\"\n"}, errdefs.ErrFailedPrecondition, ""},
	} {
		if !tc.err.Is(tc.class) || tc.text != "" && tc.err.Error() != tc.text {
			t.Errorf("%+v: Is(%v)=%v, text %q want %q", tc.err, tc.class, tc.err.Is(tc.class), tc.err.Error(), tc.text)
		}
	}
}

func TestProcessOrder(t *testing.T) {
	c := &Container{processes: map[string]*Process{}}
	for _, id := range []string{"b", "init", "a", "c"} {
		c.processes[id] = &Process{id: id}
	}
	var got []string
	for _, p := range c.Processes() {
		got = append(got, p.id)
	}
	if strings.Join(got, ",") != "init,a,b,c" {
		t.Fatalf("Processes order = %v", got)
	}
}
