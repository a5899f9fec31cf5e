package podnet

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// needRoot skips a test that needs root, or fails it under CI=true, where
// a skipped test would hide a broken machine.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		missing(t, "needs root")
	}
}

// needPlugins is needRoot plus the CNI plugins and iptables the network
// tests run for real.
func needPlugins(t *testing.T) {
	t.Helper()
	needRoot(t)
	for _, p := range []string{"bridge", "host-local", "loopback", "portmap"} {
		if _, err := os.Stat(filepath.Join(DefaultPluginDir, p)); err != nil {
			missing(t, "CNI plugin "+p+" not in "+DefaultPluginDir+": install containernetworking-plugins (apt-get install containernetworking-plugins iptables)")
		}
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		missing(t, "iptables not found: install iptables (apt-get install containernetworking-plugins iptables)")
	}
}

func missing(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// randHex gives names unique across tests and runs (bridges, networks).
func randHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
