package runtime

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	for _, data := range []string{"first", "second, longer"} {
		must(t, writeFileAtomic(path, []byte(data), 0o600))
		got, err := os.ReadFile(path)
		must(t, err)
		if string(got) != data {
			t.Fatalf("content %q, want %q", got, data)
		}
	}
	fi, err := os.Stat(path)
	must(t, err)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("temp files left: %v", entries)
	}
	if err := writeFileAtomic(filepath.Join(dir, "missing", "f"), nil, 0o600); err == nil {
		t.Fatal("write into a missing dir succeeded")
	}
}
