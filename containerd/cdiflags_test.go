package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestCDISpecDirFlag(t *testing.T) {
	cfg, err := parseFlags()
	if err != nil || cfg.cri.cdiSpecDirs != nil {
		t.Fatalf("default: %v, %v; want nil (the CDI library's /etc/cdi and /var/run/cdi)", cfg.cri.cdiSpecDirs, err)
	}
	wd, _ := os.Getwd()
	cfg, err = parseFlags("--cdi-spec-dir", "rel/cdi", "--cdi-spec-dir", "/var/run/cdi")
	if want := []string{filepath.Join(wd, "rel/cdi"), "/var/run/cdi"}; err != nil || !slices.Equal(cfg.cri.cdiSpecDirs, want) {
		t.Fatalf("--cdi-spec-dir twice: %v, %v; want %v (absolute, in order)", cfg.cri.cdiSpecDirs, err, want)
	}
	if _, err := parseFlags("--cdi-spec-dir", ""); err == nil {
		t.Fatal("an empty --cdi-spec-dir was accepted")
	}
}
