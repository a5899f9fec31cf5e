package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOpenOutputRules: a FIFO, /dev/null and a new path are accepted (the
// new one created 0600); an existing file, a symlink (even to a FIFO) and a
// directory are refused and left exactly as they were.
func TestOpenOutputRules(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	host := filepath.Join(dir, "host-file")
	os.WriteFile(host, []byte("precious"), 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink(fifo, link)
	newPath := filepath.Join(dir, "new.log")

	for _, ok := range []string{fifo, os.DevNull, newPath} {
		f, err := openOutput(ok)
		if err != nil {
			t.Fatalf("openOutput(%s): %v", ok, err)
		}
		f.Close()
	}
	if st, err := os.Lstat(newPath); err != nil || st.Mode() != 0o600 {
		t.Fatalf("new output: %v, mode %v; want a 0600 file", err, st.Mode())
	}
	for _, bad := range []string{host, link, dir, newPath} {
		if f, err := openOutput(bad); err == nil {
			f.Close()
			t.Errorf("openOutput(%s) accepted", bad)
		}
	}
	if data, _ := os.ReadFile(host); string(data) != "precious" {
		t.Fatalf("host file now %q", data)
	}
}

// TestOpenInputReadOnly: stdin is opened read-only and never created; a
// symlink and a directory are refused.
func TestOpenInputReadOnly(t *testing.T) {
	dir := t.TempDir()
	host := filepath.Join(dir, "in")
	os.WriteFile(host, []byte("data"), 0o644)
	f, err := openInput(host)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("x")); err == nil {
		t.Fatal("stdin handle is writable")
	}
	f.Close()
	if _, err := openInput(filepath.Join(dir, "missing")); !errors.Is(err, unix.ENOENT) {
		t.Fatalf("missing stdin: %v, want ENOENT", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("stdin was created")
	}
	link := filepath.Join(dir, "link")
	os.Symlink(host, link)
	for _, bad := range []string{link, dir} {
		if f, err := openInput(bad); err == nil {
			f.Close()
			t.Errorf("openInput(%s) accepted", bad)
		}
	}
}

// TestOpenLogFileRules: a new path is created 0640 and an existing regular
// file is appended to; a symlink (even to a regular file), a FIFO, a
// directory and a path in a missing directory are refused, and nothing is
// written through them.
func TestOpenLogFileRules(t *testing.T) {
	dir := t.TempDir()
	newPath := filepath.Join(dir, "0.log")
	f, err := openLogFile(newPath)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("one\n")
	f.Close()
	if st, err := os.Lstat(newPath); err != nil || st.Mode() != 0o640 {
		t.Fatalf("new log: %v, mode %v; want a 0640 file", err, st.Mode())
	}
	if f, err = openLogFile(newPath); err != nil {
		t.Fatalf("existing log: %v", err)
	}
	f.WriteString("two\n")
	f.Close()
	if data, _ := os.ReadFile(newPath); string(data) != "one\ntwo\n" {
		t.Fatalf("log holds %q, want both lines appended", data)
	}

	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	host := filepath.Join(dir, "host-file")
	os.WriteFile(host, []byte("precious"), 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink(host, link)
	dangling := filepath.Join(dir, "dangling")
	os.Symlink(filepath.Join(dir, "nowhere"), dangling)
	for _, bad := range []string{link, dangling, fifo, dir, filepath.Join(dir, "missing", "0.log")} {
		if f, err := openLogFile(bad); err == nil {
			f.Close()
			t.Errorf("openLogFile(%s) accepted", bad)
		}
	}
	if data, _ := os.ReadFile(host); string(data) != "precious" {
		t.Fatalf("host file now %q", data)
	}
	if _, err := os.Lstat(filepath.Join(dir, "nowhere")); err == nil {
		t.Fatal("a dangling symlink's target was created")
	}
}
