package runtime_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evjournal/containerd/runtime"
)

// TestPruneAside: the oldest set-aside dirs beyond keep go, by the time in
// their names (what SetAside wrote), else by modification time; files and a
// missing .aside are left alone.
func TestPruneAside(t *testing.T) {
	stamp := func(d time.Duration) string {
		return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(d).Format("20060102T150405.000000000Z")
	}
	// Named so that sorting by name would pick the wrong ones.
	dirs := map[string]time.Duration{
		"z." + stamp(0): 0, "retired-y.1." + stamp(time.Nanosecond): 0, "x." + stamp(time.Hour): 0,
		"w." + stamp(2*time.Hour): 0, "unstamped-old": -time.Hour, "unstamped-new": 3 * time.Hour,
	}
	tests := []struct {
		keep int
		want string // what is left, oldest first
	}{
		{0, "unstamped-old z retired-y x w unstamped-new"},
		{-1, "unstamped-old z retired-y x w unstamped-new"},
		{6, "unstamped-old z retired-y x w unstamped-new"},
		{4, "retired-y x w unstamped-new"},
		{1, "unstamped-new"},
	}
	for _, tt := range tests {
		root := t.TempDir()
		aside := filepath.Join(root, ".aside")
		for name, age := range dirs {
			p := filepath.Join(aside, name)
			if err := os.MkdirAll(p, 0o700); err != nil {
				t.Fatal(err)
			}
			mtime := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(age)
			if err := os.Chtimes(p, mtime, mtime); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(aside, "a-file"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		removed, err := runtime.PruneAside(root, tt.keep)
		if err != nil {
			t.Fatalf("keep %d: %v", tt.keep, err)
		}
		if got := left(t, aside); got != tt.want {
			t.Errorf("keep %d: left %q, want %q (removed %q)", tt.keep, got, tt.want, removed)
		}
		if len(removed) != len(dirs)-len(strings.Fields(tt.want)) {
			t.Errorf("keep %d: removed %q", tt.keep, removed)
		}
	}
	if removed, err := runtime.PruneAside(t.TempDir(), 1); err != nil || removed != nil {
		t.Errorf("no .aside: removed %q, %v", removed, err)
	}
}

// left names the dirs of aside, oldest first (the order PruneAside uses),
// each by its name up to the first '.'; it checks that files are kept.
func left(t *testing.T, aside string) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(aside, "a-file")); err != nil {
		t.Errorf("a file in .aside was removed: %v", err)
	}
	var names []string
	for _, name := range []string{"unstamped-old", "z", "retired-y", "x", "w", "unstamped-new"} {
		matches, _ := filepath.Glob(filepath.Join(aside, name+"*"))
		for _, m := range matches {
			if fi, err := os.Stat(m); err == nil && fi.IsDir() && strings.SplitN(filepath.Base(m), ".", 2)[0] == name {
				names = append(names, name)
			}
		}
	}
	return strings.Join(names, " ")
}
