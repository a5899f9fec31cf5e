package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWrite: each write replaces the content whole, with the mode asked,
// and leaves no temp file; a write that cannot happen leaves nothing.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	for _, data := range []string{"first, longer", "2"} {
		if err := Write(path, []byte(data), 0o640); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != data {
			t.Fatalf("read back %q, %v; want %q", got, err, data)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v, %v; want 0640", fi.Mode(), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("dir holds %v, want only f (no temp file left)", entries)
	}
	if err := Write(filepath.Join(dir, "missing", "f"), nil, 0o600); err == nil {
		t.Fatal("write into a missing dir succeeded")
	}
}

// TestWriteOverDirFails: a path that is a directory is not replaced, and
// the temp file is removed.
func TestWriteOverDirFails(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "d")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Write(target, []byte("x"), 0o600); err == nil {
		t.Fatal("a directory was replaced by a file")
	}
	if fi, err := os.Stat(target); err != nil || !fi.IsDir() {
		t.Fatalf("target after the failed write: %v, %v", fi, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("dir holds %v, want only d", entries)
	}
}

func TestSyncDir(t *testing.T) {
	if err := SyncDir(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("SyncDir of a missing dir succeeded")
	}
}

// TestRetireDir: the dir leaves its place whole, into a new dir under the
// trash dir (made if need be); a dir that is not there is no error.
func TestRetireDir(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "records", "abc")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "record.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	trash := filepath.Join(root, "removing")
	gone, err := RetireDir(dir, trash)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(gone) != trash {
		t.Errorf("retired into %s, want a dir under %s", gone, trash)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the dir is still in its place: %v", err)
	}
	if data, err := os.ReadFile(filepath.Join(gone, "abc", "record.json")); err != nil || string(data) != "{}" {
		t.Errorf("the retired dir lost its content: %q %v", data, err)
	}
	again, err := RetireDir(dir, trash)
	if err != nil || again != "" {
		t.Errorf("retiring a dir that is gone: %q %v, want \"\" and no error", again, err)
	}
	if ents, _ := os.ReadDir(trash); len(ents) != 1 {
		t.Errorf("trash holds %d entries, want the one retired dir", len(ents))
	}
}
