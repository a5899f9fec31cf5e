package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/evjournal/containerd/internal/atomicfile"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Records of the CRI objects, one JSON file each under the CRI root:
// <root>/sandboxes/<id>/sandbox.json and <root>/containers/<id>/container.json,
// written atomically before the object becomes visible and never changed
// after. They hold what the request said and what setting the object up
// made (its network facts, its image), nothing of its lifecycle: whether it
// runs, when it exited and with what is the supervisor loop's
// (supervisor/objects), asked at every read.

type sandboxRecord struct {
	ID        string          `json:"id"`
	Config    json.RawMessage `json:"config"` // protojson of runtimeapi.PodSandboxConfig
	CreatedAt int64           `json:"createdAt"`
	// NetNS is the pinned network namespace; "" with host network.
	NetNS string   `json:"netns,omitempty"`
	IPs   []string `json:"ips,omitempty"`
	// Shm is the pod's /dev/shm tmpfs on the host; "" with host IPC.
	Shm string `json:"shm,omitempty"`
	// RuntimeHandler names the runtime the pod's pause, containers and
	// execs run through ("": the default; records of daemons before
	// handlers have none, and ran on the default).
	RuntimeHandler string `json:"runtimeHandler,omitempty"`
	// State is only ever read: the lifecycle that daemons before the
	// objects kept here, imported once (legacy.go).
	State string `json:"state,omitempty"`
}

type containerRecord struct {
	ID        string          `json:"id"`
	SandboxID string          `json:"sandboxId"`
	Config    json.RawMessage `json:"config"` // protojson of runtimeapi.ContainerConfig
	ImageID   string          `json:"imageId"`
	ImageRef  string          `json:"imageRef"`
	CreatedAt int64           `json:"createdAt"`
	LogPath   string          `json:"logPath,omitempty"`
	// User is the identity the spec gives the process (ContainerStatus.user).
	User *specs.User `json:"user,omitempty"`
	// StopSignal is what StopContainer sends first ("SIGQUIT"): the
	// config's stop_signal, else the image's, else SIGTERM.
	StopSignal string `json:"stopSignal,omitempty"`
	// Read only, from daemons before the objects (legacy.go).
	legacyLifecycle
}

func marshalProto(m proto.Message) (json.RawMessage, error) {
	return protojson.Marshal(m)
}

func unmarshalProto(data json.RawMessage, m proto.Message) error {
	return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(data, m)
}

// writeRecord writes v as dir/name atomically, making dir.
func writeRecord(dir, name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, name), data, 0o600)
}

// loadRecords reads every <parent>/<id>/<name>; the ids of dirs without a
// readable record are returned apart (a crash before the record was
// written, or damage: the caller decides).
func loadRecords[T any](parent, name string) (recs []T, bad map[string]error, err error) {
	entries, err := os.ReadDir(parent)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	bad = map[string]error{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(parent, e.Name(), name))
		if err != nil {
			bad[e.Name()] = err
			continue
		}
		var v T
		if err := json.Unmarshal(data, &v); err != nil {
			bad[e.Name()] = fmt.Errorf("%s: %w", name, err)
			continue
		}
		recs = append(recs, v)
	}
	return recs, bad, nil
}
