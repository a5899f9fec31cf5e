package podnet

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

const goodConflist = `{"cniVersion": "1.0.0", "name": "good", "plugins": [{"type": "bridge"}, {"type": "portmap"}]}`

// TestConfigLookup covers which file is the pod network and how a bad or
// missing one is reported: the error names the dir or the file.
func TestConfigLookup(t *testing.T) {
	tests := []struct {
		name     string
		files    map[string]string // nil: the dir does not exist
		wantNet  string            // network name, or
		wantErrs []string          // substrings of the error ("DIR" is the dir)
	}{
		{name: "missing dir", wantErrs: []string{"no network config found in DIR", "does not exist"}},
		{name: "empty dir", files: map[string]string{}, wantErrs: []string{"no network config found in DIR"}},
		{name: "other extensions only", files: map[string]string{"README": "x", "a.yaml": "x"},
			wantErrs: []string{"no network config found in DIR"}},
		{name: "conflist", files: map[string]string{"10-good.conflist": goodConflist}, wantNet: "good"},
		{name: "single plugin conf", files: map[string]string{"10-one.conf": `{"cniVersion": "1.0.0", "name": "one", "type": "bridge"}`},
			wantNet: "one"},
		{name: "lexically first wins", files: map[string]string{
			"20-b.conf": `{"cniVersion": "1.0.0", "name": "b", "type": "bridge"}`, "10-good.conflist": goodConflist},
			wantNet: "good"},
		{name: "bad JSON", files: map[string]string{"10-bad.conflist": `{"name": "x", "plugins": [`, "20-ok.conflist": goodConflist},
			wantErrs: []string{"DIR/10-bad.conflist", "invalid JSON"}},
		{name: "no plugins", files: map[string]string{"10-empty.conflist": `{"cniVersion": "1.0.0", "name": "x", "plugins": []}`},
			wantErrs: []string{"DIR/10-empty.conflist", "no plugins"}},
		{name: "no name", files: map[string]string{"10-anon.conflist": `{"cniVersion": "1.0.0", "plugins": [{"type": "bridge"}]}`},
			wantErrs: []string{"DIR/10-anon.conflist", "no name"}},
		{name: "conf without type", files: map[string]string{"10-x.conf": `{"cniVersion": "1.0.0", "name": "x"}`},
			wantErrs: []string{"DIR/10-x.conf", `plugin "type"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "net.d")
			if tt.files != nil {
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for name, data := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			list, err := loadConfig(dir)
			if tt.wantErrs == nil {
				if err != nil || list.Name != tt.wantNet {
					t.Fatalf("loaded %v, %v; want network %q", list, err, tt.wantNet)
				}
				return
			}
			checkErr(t, err, dir, tt.wantErrs)
			// The same reason reaches callers of Status, Setup and Teardown.
			n, nerr := NewNetwork(Config{ConfDir: dir, CacheDir: t.TempDir()})
			if nerr != nil {
				t.Fatal(nerr)
			}
			checkErr(t, n.Status(), dir, tt.wantErrs)
			_, err = n.Setup(context.Background(), "pod", "/nonexistent", SetupOptions{})
			checkErr(t, err, dir, tt.wantErrs)
			// A teardown with something to undo (a namespace, nothing
			// cached) needs the config; one with nothing left does not.
			ns := filepath.Join(t.TempDir(), "netns")
			if err := os.WriteFile(ns, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			checkErr(t, n.Teardown(context.Background(), "pod", ns), dir, tt.wantErrs)
			if err := n.Teardown(context.Background(), "pod", ""); err != nil {
				t.Errorf("teardown of a pod with no namespace and nothing cached: %v, want nothing to do", err)
			}
		})
	}
}

func checkErr(t *testing.T, err error, dir string, want []string) {
	t.Helper()
	if !errdefs.IsFailedPrecondition(err) {
		t.Errorf("error %v, want a failed precondition", err)
		return
	}
	for _, w := range want {
		if w = strings.ReplaceAll(w, "DIR", dir); !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}

// TestStatusMissingPlugin: a config whose plugin is not installed is not a
// ready network, and the reason names the plugin and where it was sought.
func TestStatusMissingPlugin(t *testing.T) {
	dir, plugins := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "10-good.conflist"), []byte(goodConflist), 0o644); err != nil {
		t.Fatal(err)
	}
	// loopback and bridge are there (as empty executables), portmap not.
	for _, p := range []string{"loopback", "bridge"} {
		if err := os.WriteFile(filepath.Join(plugins, p), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n, err := NewNetwork(Config{ConfDir: dir, PluginDirs: []string{plugins}})
	if err != nil {
		t.Fatal(err)
	}
	checkErr(t, n.Status(), dir, []string{`plugin "portmap" not found in ` + plugins})
	if err := os.WriteFile(filepath.Join(plugins, "portmap"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := n.Status(); err != nil {
		t.Fatalf("Status with every plugin: %v", err)
	}
}

func TestSetupNeedsIDs(t *testing.T) {
	n, err := NewNetwork(Config{ConfDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Setup(context.Background(), "", "/x", SetupOptions{}); !errdefs.IsInvalidArgument(err) {
		t.Errorf("Setup without a pod ID: %v", err)
	}
	if _, err := n.Setup(context.Background(), "pod", "", SetupOptions{}); !errdefs.IsInvalidArgument(err) {
		t.Errorf("Setup without a netns: %v", err)
	}
	if err := n.Teardown(context.Background(), "", "/x"); !errdefs.IsInvalidArgument(err) {
		t.Errorf("Teardown without a pod ID: %v", err)
	}
}
