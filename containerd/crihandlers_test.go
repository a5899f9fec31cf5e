package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	criserver "github.com/evjournal/containerd/cri/server"
)

// TestRuntimeHandlerFlag: --cri-runtime-handler NAME=RUNTIME[,ARG...],
// repeatable; a bad value stops the daemon before it starts, saying what
// is wrong and what is wanted.
func TestRuntimeHandlerFlag(t *testing.T) {
	cfg, err := parseFlags("--cri-runtime-handler", "crun=/usr/bin/crun,--root=/run/crun-k8s,--debug", "--cri-runtime-handler", "test-handler=runc")
	if err != nil {
		t.Fatal(err)
	}
	want := []criserver.RuntimeHandler{{Name: "crun", Runtime: "/usr/bin/crun", Args: []string{"--root=/run/crun-k8s", "--debug"}},
		{Name: "test-handler", Runtime: "runc", Args: []string{}}}
	if !reflect.DeepEqual(cfg.cri.handlers, want) {
		t.Fatalf("handlers %+v, want %+v", cfg.cri.handlers, want)
	}
	for _, c := range []struct{ value, want string }{
		{"crun", "want NAME=RUNTIME"},
		{"crun=", "want NAME=RUNTIME"},
		{"=crun", "not a lowercase RFC 1123 label"},
		{"Crun=crun", "not a lowercase RFC 1123 label"},
		{"a_b=crun", "not a lowercase RFC 1123 label"},
		{"crun=crun,,--debug", "an empty runtime arg"},
		{"crun=crun,", "an empty runtime arg"},
	} {
		_, err := parseFlags("--cri-runtime-handler", c.value)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.value) {
			t.Errorf("--cri-runtime-handler %q: %v, want an error naming the value and saying %q", c.value, err, c.want)
		}
	}
	if _, err := parseFlags("--cri-runtime-handler", "a=x", "--cri-runtime-handler", "a=y"); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("a handler given twice: %v", err)
	}
}

// TestResolveRuntimeHandlers: a bare runtime name is found beside the
// daemon first, then on PATH; a runtime that is nowhere stops the start.
func TestResolveRuntimeHandlers(t *testing.T) {
	exeDir := t.TempDir()
	beside := filepath.Join(exeDir, "myrt")
	if err := os.WriteFile(beside, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := resolveRuntimeHandlers([]criserver.RuntimeHandler{{Name: "a", Runtime: "myrt"}, {Name: "b", Runtime: "sh"}}, exeDir)
	if err != nil || got[0].Runtime != beside || !filepath.IsAbs(got[1].Runtime) {
		t.Fatalf("resolved %+v %v, want %s and sh's path", got, err, beside)
	}
	_, err = resolveRuntimeHandlers([]criserver.RuntimeHandler{{Name: "gone", Runtime: "no-such-runtime-here"}}, exeDir)
	if err == nil || !strings.Contains(err.Error(), "--cri-runtime-handler gone") || !strings.Contains(err.Error(), "no-such-runtime-here") {
		t.Fatalf("a missing runtime: %v", err)
	}
}

// TestCNIConfTemplateFlag: --cni-conf-template is made absolute (the
// daemon's working dir is not the user's).
func TestCNIConfTemplateFlag(t *testing.T) {
	wd, _ := os.Getwd()
	cfg, err := parseFlags("--cni-conf-template", "rel/tmpl")
	if err != nil || cfg.cri.cniConfTemplate != filepath.Join(wd, "rel/tmpl") {
		t.Fatalf("--cni-conf-template rel/tmpl: %q %v", cfg.cri.cniConfTemplate, err)
	}
}
