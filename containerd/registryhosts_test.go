package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRegistryConfigPathFlag(t *testing.T) {
	cfg, err := parseFlags()
	if err != nil || cfg.cri.registryHosts != "" {
		t.Fatalf("default: %q, %v; want none", cfg.cri.registryHosts, err)
	}
	wd, _ := os.Getwd()
	cfg, err = parseFlags("--registry-config-path", "rel/certs.d", "--registry-mirror", "docker.io=http://m", "--insecure-registry", "r:5000")
	if want := filepath.Join(wd, "rel/certs.d"); err != nil || cfg.cri.registryHosts != want || len(cfg.cri.mirrors["docker.io"]) != 1 || len(cfg.cri.insecure) != 1 {
		t.Fatalf("--registry-config-path with the older flags: %+v, %v; want %s beside them", cfg.cri, err, want)
	}
}
