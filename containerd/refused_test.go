package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRefusedDaemonChangesNothing: a second daemon refused because another
// holds its state dir or its journal dir makes no dir, no lock file and no
// socket, and leaves an existing dir's mode alone.
func TestRefusedDaemonChangesNothing(t *testing.T) {
	held := filepath.Join(shortTempDir(t), "state")
	first := startDaemon(t, held)
	first.waitServing(t)
	tests := []struct {
		name             string
		state, journal   string // "" = a new dir of the test's own
		heldWhat, heldAt string
	}{
		{"journal dir held, new state dir", "", held + ".journal", "journal dir", held + ".journal"},
		{"state dir held, new journal dir", held, "", "state dir", held},
		{"journal dir held, state dir open to all", "open", held + ".journal", "journal dir", held + ".journal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := shortTempDir(t)
			state, journal := or(tt.state, filepath.Join(dir, "new")), or(tt.journal, filepath.Join(dir, "new.journal"))
			if tt.state == "open" {
				state = openDir(t, filepath.Join(dir, "open"))
			}
			sock := filepath.Join(dir, "second.sock")
			cmd := exec.Command(daemonBin, "--state-dir", state, "--journal-dir", journal, "--listen", "unix://"+sock)
			var errOut bytes.Buffer
			cmd.Stderr = &errOut
			want := fmt.Sprintf("another containerd is running with %s %s (pid %d)", tt.heldWhat, tt.heldAt, first.cmd.Process.Pid)
			if err := cmd.Run(); err == nil || !strings.Contains(errOut.String(), want) {
				t.Fatalf("second daemon: %v\n%s\nwant %q", err, errOut.String(), want)
			}
			if entries := tree(t, dir); !equalStrings(entries, wantTree(tt.state == "open")) {
				t.Errorf("after the refusal %s holds %q, want %q", dir, entries, wantTree(tt.state == "open"))
			}
		})
	}
}

func or(s, dflt string) string {
	if s != "" {
		return s
	}
	return dflt
}

// openDir makes an empty dir with mode 0777, which a daemon that starts
// tightens.
func openDir(t *testing.T, dir string) string {
	t.Helper()
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	return dir
}

func wantTree(open bool) []string {
	if open {
		return []string{"open drwxrwxrwx"}
	}
	return nil
}

// tree lists every path under dir with its mode.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		out = append(out, rel+" "+fi.Mode().String())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func equalStrings(a, b []string) bool { return strings.Join(a, "\n") == strings.Join(b, "\n") }
