package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestLastErrorEntry(t *testing.T) {
	for _, tc := range []struct{ name, log, want string }{
		{"empty", "", ""},
		{"no error", `{"level":"warning","msg":"w"}` + "\n", ""},
		{"one error", `{"level":"error","msg":"exec: \"/nope\": stat /nope: no such file or directory","time":"x"}` + "\n",
			`exec: "/nope": stat /nope: no such file or directory`},
		{"the last error wins", `{"level":"error","msg":"first"}` + "\n" + `{"level":"info","msg":"i"}` + "\n" + `{"level":"error","msg":"second"}` + "\n", "second"},
		{"torn and foreign lines are skipped", `{"level":"error","msg":"kept"}` + "\nnot json\n" + `{"level":"error","msg":"tor`, "kept"},
		{"no final newline", `{"level":"error","msg":"last"}`, "last"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lastErrorEntry(strings.NewReader(tc.log)); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestNewRuncError: runc's log first (only what this run wrote), then its
// stderr, then a message of our own.
func TestNewRuncError(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "log.json")
	old := `{"level":"error","msg":"from an earlier run"}` + "\n"
	if err := os.WriteFile(log, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	from := fileSize(log)
	stderr := func() string { return "  runc: on stderr\n" }
	exit1 := unix.WaitStatus(1 << 8)

	if got := newRuncError("create", exit1, log, from, stderr).Error(); got != "runc: on stderr" {
		t.Errorf("without a new log entry: %q", got)
	}
	f, _ := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"level":"error","msg":"from this run"}` + "\n")
	f.Close()
	if got := newRuncError("create", exit1, log, from, stderr).Error(); got != "from this run" {
		t.Errorf("with a log entry: %q", got)
	}
	none := func() string { return "" }
	if got := newRuncError("exec", exit1, filepath.Join(dir, "missing"), 0, none).Error(); got != "runc exec failed with status 1 and no message" {
		t.Errorf("with nothing: %q", got)
	}
}
