package main

import (
	"strings"
	"testing"

	criserver "github.com/evjournal/containerd/cri/server"
)

// TestExecSyncFlags: the ExecSync output budget reaches the CRI config,
// defaults to DefaultExecOutputBudget, and a size no call could use is
// refused at start, naming the flag.
func TestExecSyncFlags(t *testing.T) {
	cfg, err := parseFlags()
	if err != nil || cfg.cri.execSyncBudget != criserver.DefaultExecOutputBudget {
		t.Fatalf("default budget %d (%v), want %d", cfg.cri.execSyncBudget, err, criserver.DefaultExecOutputBudget)
	}
	if cfg, err = parseFlags("--exec-sync-output-budget", "4MiB"); err != nil || cfg.cri.execSyncBudget != 4<<20 {
		t.Fatalf("budget %d (%v), want 4 MiB", cfg.cri.execSyncBudget, err)
	}
	for _, bad := range []string{"lots", "0", "-1MiB"} {
		if _, err := parseFlags("--exec-sync-output-budget", bad); err == nil || !strings.Contains(err.Error(), "--exec-sync-output-budget") {
			t.Errorf("%q: %v, want an error naming the flag", bad, err)
		}
	}
}
