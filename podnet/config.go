package podnet

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/containerd/errdefs"
	"github.com/containernetworking/cni/libcni"
)

// Defaults where Debian's containernetworking-plugins, kubelet and
// containerd look.
const (
	DefaultPluginDir = "/usr/lib/cni"
	DefaultConfDir   = "/etc/cni/net.d"
)

// confExtensions are the files the config dir is searched for, as kubelet
// and containerd do.
var confExtensions = []string{".conf", ".conflist", ".json"}

// loopbackConfig brings up lo in every pod; the plugin ships with the
// standard plugins, so it needs no file of its own in the config dir.
const loopbackConfig = `{"cniVersion":"1.0.0","name":"cni-loopback","plugins":[{"type":"loopback"}]}`

// loadConfig returns the pod network: the lexically first config file in
// dir. A bad first file is an error naming it rather than a silent fall-back
// to the next one, which could plug pods into a network nobody meant.
// Errors are ErrFailedPrecondition: the node's operator must fix the dir.
func loadConfig(dir string) (*libcni.NetworkConfigList, error) {
	files, err := libcni.ConfFiles(dir, confExtensions)
	if err != nil {
		return nil, fmt.Errorf("read network config dir %s: %w: %w", dir, err, errdefs.ErrFailedPrecondition)
	}
	if len(files) == 0 {
		reason := ""
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			reason = " (the directory does not exist)"
		}
		return nil, fmt.Errorf("no network config found in %s%s: %w", dir, reason, errdefs.ErrFailedPrecondition)
	}
	slices.Sort(files)
	list, err := loadConfigFile(files[0])
	if err != nil {
		return nil, fmt.Errorf("network config %s: %w: %w", files[0], err, errdefs.ErrFailedPrecondition)
	}
	return list, nil
}

// loadConfigFile reads a conflist, or a single plugin's config which it
// wraps in a list of one. The file's shape, not its extension, decides:
// kubelet and containerd disagree on extensions, the JSON does not lie.
func loadConfigFile(path string) (*libcni.NetworkConfigList, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if _, ok := raw["plugins"]; !ok {
		if data, err = wrapPlugin(raw); err != nil {
			return nil, err
		}
	}
	list, err := libcni.NetworkConfFromBytes(data)
	if err != nil {
		return nil, err
	}
	if !list.LoadOnlyInlinedPlugins {
		// CNI 1.1: plugins may also live in <dir>/<network name>/*.conf.
		more, err := libcni.NetworkPluginConfsFromFiles(filepath.Dir(path), list.Name)
		if err != nil {
			return nil, err
		}
		list.Plugins = append(list.Plugins, more...)
	}
	if len(list.Plugins) == 0 {
		return nil, errors.New("no plugins in the network")
	}
	return list, nil
}

// wrapPlugin turns a single plugin's config (a .conf file) into a list.
func wrapPlugin(plugin map[string]any) ([]byte, error) {
	if _, ok := plugin["type"].(string); !ok {
		return nil, errors.New(`neither "plugins" nor a plugin "type"`)
	}
	return json.Marshal(map[string]any{
		"name":       plugin["name"],
		"cniVersion": plugin["cniVersion"],
		"plugins":    []any{plugin},
	})
}
