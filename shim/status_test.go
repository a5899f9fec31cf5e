package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestShellStatus(t *testing.T) {
	for _, tc := range []struct {
		ws   unix.WaitStatus
		want int
	}{
		{0, 0},
		{3 << 8, 3},
		{255 << 8, 255},
		{unix.WaitStatus(unix.SIGKILL), 137},
		{unix.WaitStatus(unix.SIGTERM), 143},
		{unix.WaitStatus(unix.SIGSEGV) | 0x80, 139}, // with a core dump
	} {
		if got := shellStatus(tc.ws); got != tc.want {
			t.Errorf("shellStatus(%#x) = %d, want %d", uint32(tc.ws), got, tc.want)
		}
	}
}

func TestStatField(t *testing.T) {
	for _, tc := range []struct {
		stat string
		n    int
		want string
		ok   bool
	}{
		{"42 (sh) S 1 42 42 0 -1", 3, "S", true},
		{"42 (sh) S 1 42 42 0 -1", 4, "1", true},
		{"42 (a) b) (c) Z 7 0", 3, "Z", true},
		{"42 (a) b) (c) Z 7 0", 4, "7", true},
		{"42 (sh) S", 22, "", false},
		{"42 sh S 1", 3, "", false},
	} {
		got, err := statField([]byte(tc.stat), tc.n)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("statField(%q, %d) = %q, %v; want %q", tc.stat, tc.n, got, err, tc.want)
		}
	}
	// Our own start time reads as a number.
	if st, err := startTime(os.Getpid()); err != nil || strings.Trim(st, "0123456789") != "" {
		t.Errorf("startTime(self) = %q, %v", st, err)
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	for _, content := range []string{"first", "2"} {
		if err := writeFileAtomic(dir, "exitStatus", []byte(content)); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(dir, "exitStatus"))
		if err != nil || string(data) != content {
			t.Fatalf("read back %q, %v; want %q", data, err, content)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("dir holds %d entries, want only exitStatus (no temp file left)", len(entries))
	}
	if fi, err := os.Stat(filepath.Join(dir, "exitStatus")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v; want 0600", fi.Mode(), err)
	}
	if err := writeFileAtomic(filepath.Join(dir, "missing"), "x", nil); err == nil {
		t.Error("writing into a missing dir: no error")
	}
}

func TestAppendTime(t *testing.T) {
	for _, at := range []time.Time{
		time.Date(2024, 5, 6, 7, 8, 9, 10, time.UTC),
		time.Date(1999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("x", 3600)),
		time.Unix(0, 0),
	} {
		want := at.UTC().Format("2006-01-02T15:04:05.000000000Z")
		if got := string(appendTime(nil, at)); got != want {
			t.Errorf("appendTime(%v) = %s, want %s", at, got, want)
		}
	}
}

func TestReadPidFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		content string
		want    int
	}{{"1234", 1234}, {"1234\n", 1234}, {"", 0}, {"-1", 0}, {"12x", 0}} {
		path := filepath.Join(dir, "pid")
		os.WriteFile(path, []byte(tc.content), 0o600)
		got, err := readPidFile(path)
		if got != tc.want || (err == nil) != (tc.want > 0) {
			t.Errorf("readPidFile(%q) = %d, %v; want %d", tc.content, got, err, tc.want)
		}
	}
}
