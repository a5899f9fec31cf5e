package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestHalfDeletedDirsAreBounded: a daemon killed while deleting containers
// leaves half-deleted dirs under .retired (their state.json already gone);
// the next start sets them aside under .aside, and keeps only the newest
// --aside-keep (50 by default) of all the set-aside dirs, saying so in its
// log.
func TestHalfDeletedDirsAreBounded(t *testing.T) {
	stateDir := filepath.Join(shortTempDir(t), "state")
	halfDeleted(t, stateDir, "a", 52)
	d := startDaemon(t, stateDir)
	d.waitServing(t)
	if got := asideNames(t, stateDir); len(got) != 50 || got[0] != "retired-a02" {
		t.Errorf(".aside holds %d dirs from %q, want the newest 50, from retired-a02", len(got), first(got))
	}
	wantLog(t, d, `msg="restore: removed the 2 oldest set-aside state dirs from .aside/; the newest 50 are kept"`)
	d.cmd.Process.Kill()
	<-d.done
	d.done <- nil

	halfDeleted(t, stateDir, "b", 3)
	d = startDaemon(t, stateDir, "--aside-keep", "2")
	d.waitServing(t)
	if got := asideNames(t, stateDir); strings.Join(got, " ") != "retired-b01 retired-b02" {
		t.Errorf(".aside holds %q, want the 2 set aside last: retired-b01 retired-b02", got)
	}
	wantLog(t, d, `msg="restore: removed the 51 oldest set-aside state dirs from .aside/; the newest 2 are kept"`)
}

// halfDeleted makes n retired container dirs <prefix>00.1... as a `rm -r`
// cut short leaves them: state.json gone, a process dir left.
func halfDeleted(t *testing.T, stateDir, prefix string, n int) {
	t.Helper()
	for i := range n {
		dir := filepath.Join(stateDir, ".retired", fmt.Sprintf("%s%02d.1", prefix, i), "init")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "exitStatus"), []byte("0"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// asideNames lists .aside's dirs by the container dir each came from
// ("retired-a07"), sorted.
func asideNames(t *testing.T, stateDir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(stateDir, ".aside"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		name, _, _ := strings.Cut(e.Name(), ".")
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func first(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return names[0]
}

func wantLog(t *testing.T, d *testDaemon, line string) {
	t.Helper()
	if !strings.Contains(d.stderr.String(), line) {
		t.Errorf("the daemon's log has no %s:\n%s", line, d.stderr.String())
	}
}
