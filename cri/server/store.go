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
// written atomically. The supervisor knows running containers only; what
// kubelet asks about a created, exited or not-yet-removed container, and
// about pods, lives here and survives daemon restarts.

// Container states as recorded (the CRI enum's names, lower case).
const (
	stateCreated = "created"
	stateRunning = "running"
	stateExited  = "exited"
)

// Sandbox states as recorded.
const (
	sandboxReady    = "ready"
	sandboxNotReady = "notready"
)

type sandboxRecord struct {
	ID        string          `json:"id"`
	Config    json.RawMessage `json:"config"` // protojson of runtimeapi.PodSandboxConfig
	CreatedAt int64           `json:"createdAt"`
	State     string          `json:"state"`
	// NetNS is the pinned network namespace; "" with host network.
	NetNS string   `json:"netns,omitempty"`
	IPs   []string `json:"ips,omitempty"`
	// Pid is the pause process's host pid while it runs.
	Pid int `json:"pid,omitempty"`
	// Shm is the pod's /dev/shm tmpfs on the host; "" with host IPC.
	Shm string `json:"shm,omitempty"`
	// NetworkDown: Teardown of the CNI network was done (Stop ran).
	NetworkDown bool `json:"networkDown,omitempty"`
}

type containerRecord struct {
	ID         string          `json:"id"`
	SandboxID  string          `json:"sandboxId"`
	Config     json.RawMessage `json:"config"` // protojson of runtimeapi.ContainerConfig
	ImageID    string          `json:"imageId"`
	ImageRef   string          `json:"imageRef"`
	State      string          `json:"state"`
	CreatedAt  int64           `json:"createdAt"`
	StartedAt  int64           `json:"startedAt,omitempty"`
	FinishedAt int64           `json:"finishedAt,omitempty"`
	ExitCode   int32           `json:"exitCode,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Message    string          `json:"message,omitempty"`
	LogPath    string          `json:"logPath,omitempty"`
	Pid        int             `json:"pid,omitempty"`
	// Incarnation is the supervisor's, once started: an exit event of
	// another incarnation of the id is not this container's.
	Incarnation string `json:"incarnation,omitempty"`
	OOMKilled   bool   `json:"oomKilled,omitempty"`
	// User is the identity the spec gives the process (ContainerStatus.user).
	User *specs.User `json:"user,omitempty"`
	// Reconciled: the exit was not found and 255 recorded instead; a real
	// exit of this incarnation that comes later replaces it.
	Reconciled bool `json:"reconciled,omitempty"`
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

// loadRecords reads every <parent>/<id>/<name>; a dir without a readable
// record is reported through bad and skipped (never deleted: a person may
// want to look at it).
func loadRecords[T any](parent, name string, bad func(dir string, err error)) ([]T, error) {
	entries, err := os.ReadDir(parent)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []T
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			bad(dir, err)
			continue
		}
		var v T
		if err := json.Unmarshal(data, &v); err != nil {
			bad(dir, fmt.Errorf("%s: %w", name, err))
			continue
		}
		out = append(out, v)
	}
	return out, nil
}
