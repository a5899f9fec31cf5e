package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestChooseBinaries: a flag given is used as it is; a default name is
// taken from beside the daemon's executable when an executable file of
// that name is there, else left to PATH.
func TestChooseBinaries(t *testing.T) {
	exeDir := t.TempDir()
	for _, name := range []string{"runc", "containerd-shim"} {
		if err := os.WriteFile(filepath.Join(exeDir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name     string
		args     []string
		exeDir   string
		runtime  string
		from     string
		shim     string
		shimFrom string
	}{
		{"defaults beside the daemon", nil, exeDir, filepath.Join(exeDir, "runc"), fromBeside, filepath.Join(exeDir, "containerd-shim"), fromBeside},
		{"defaults, nothing beside", nil, t.TempDir(), "runc", fromPATH, "containerd-shim", fromPATH},
		{"executable dir unknown", nil, "", "runc", fromPATH, "containerd-shim", fromPATH},
		{"flags win", []string{"--runtime", "runc", "--shim", "/opt/shim"}, exeDir, "runc", fromFlag, "/opt/shim", fromFlag},
		{"one flag", []string{"-r", "/usr/bin/runc"}, exeDir, "/usr/bin/runc", fromFlag, filepath.Join(exeDir, "containerd-shim"), fromBeside},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseFlags(tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			cfg.chooseBinaries(tt.exeDir)
			if cfg.runtime != tt.runtime || cfg.runtimeFrom != tt.from || cfg.shim != tt.shim || cfg.shimFrom != tt.shimFrom {
				t.Fatalf("runtime %q (%s), shim %q (%s); want %q (%s), %q (%s)", cfg.runtime, cfg.runtimeFrom, cfg.shim, cfg.shimFrom,
					tt.runtime, tt.from, tt.shim, tt.shimFrom)
			}
		})
	}
}

// TestChooseBinarySkipsNonExecutables: a file without an execute bit, or a
// directory, beside the daemon is not taken for the binary.
func TestChooseBinarySkipsNonExecutables(t *testing.T) {
	exeDir := t.TempDir()
	os.WriteFile(filepath.Join(exeDir, "crun"), nil, 0o644)
	os.Mkdir(filepath.Join(exeDir, "youki"), 0o755)
	for _, name := range []string{"crun", "youki"} {
		if got, from := chooseBinary(name, false, exeDir); got != name || from != fromPATH {
			t.Errorf("%s: chose %q (%s), want the name left to PATH", name, got, from)
		}
	}
}
