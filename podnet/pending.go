package podnet

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/containernetworking/cni/libcni"

	"github.com/evjournal/containerd/internal/atomicfile"
)

// A DEL must see the ADD's runtime conf: the portmap plugin deletes a
// pod's DNAT chain only when DEL names its port mappings. libcni caches
// that conf, but only once the whole ADD has succeeded: a daemon killed
// inside the ADD (the plugins ran, nothing cached) tore the pod down with
// no port mappings and left its chain for ever. So Setup notes the conf
// in <cache dir>/pending/<pod> before the ADD, Teardown takes it when
// libcni has nothing cached, and it goes once the ADD is cached or undone.

// pendingAdd is what an ADD passes beside the config.
type pendingAdd struct {
	Args           [][2]string    `json:"args,omitempty"`
	CapabilityArgs map[string]any `json:"capabilityArgs,omitempty"`
}

func (n *Network) pendingPath(podID string) (string, error) {
	if podID == "" || podID == "." || podID == ".." || strings.ContainsRune(podID, '/') {
		return "", fmt.Errorf("pod ID %q cannot name a file: %w", podID, errdefs.ErrInvalidArgument)
	}
	return filepath.Join(n.cacheDir, "pending", podID), nil
}

// notePending records rt's args before the ADD runs with them.
func (n *Network) notePending(podID string, rt *libcni.RuntimeConf) error {
	path, err := n.pendingPath(podID)
	if err != nil {
		return err
	}
	data, err := json.Marshal(pendingAdd{Args: rt.Args, CapabilityArgs: rt.CapabilityArgs})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(path, data, 0o600)
}

// pending is the args noted for an ADD of podID, nil when none is.
func (n *Network) pending(podID string) (*pendingAdd, error) {
	path, err := n.pendingPath(podID)
	if err != nil {
		return nil, nil // no such ADD can have run
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var p pendingAdd
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("the args noted for pod %s's ADD: %w", podID, err)
	}
	return &p, nil
}

// dropPending forgets the args noted for podID's ADD, and the temp file of
// a note whose write a crash cut short (atomicfile's ".<name>.tmp-*").
func (n *Network) dropPending(podID string) error {
	path, err := n.pendingPath(podID)
	if err != nil {
		return nil
	}
	temps, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "."+podID+".tmp-*"))
	for _, p := range append(temps, path) {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}
