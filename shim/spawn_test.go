package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "myruntime")
	os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "notexec"), []byte(""), 0o644)
	t.Setenv("PATH", "/nonexistent:"+dir)
	if got, err := lookPath("myruntime"); err != nil || got != exe {
		t.Errorf("lookPath(myruntime) = %q, %v; want %q", got, err, exe)
	}
	if _, err := lookPath("notexec"); err == nil {
		t.Error("lookPath(notexec): found a file that is not executable")
	}
	if got, err := lookPath("./rel/runc"); err != nil || got != "./rel/runc" {
		t.Errorf("a path with a slash is used as is: %q, %v", got, err)
	}
}
