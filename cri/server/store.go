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

// A record dir is removed in two steps: renamed whole into
// <root>/removing/rm-*/ (one rename: its record is there or gone, never a
// dir whose record went first, which the next start would take for
// damage and keep), then its content is removed. A crash between the two
// leaves no record, so the reconcile finishes the object's removal, and
// sweepRemoving removes what the rename put aside.

func (s *Server) removingDir() string { return filepath.Join(s.cfg.Root, "removing") }

// retireRecordDir moves dir into the removing dir and returns where it
// went ("" if dir does not exist). Once moved, the record is gone: a failed
// fsync of its parent after the move is only logged.
func (s *Server) retireRecordDir(dir string) (string, error) {
	gone, err := atomicfile.RetireDir(dir, s.removingDir())
	if err != nil && gone == "" {
		return "", fmt.Errorf("retire %s: %w", dir, err)
	}
	if err != nil {
		s.log.WithError(err).WithField("dir", dir).Warn("cri: sync the parent of a retired record dir")
	}
	return gone, nil
}

// removeRecordDir removes a record dir: retired first, then its content
// (see removeRetired).
func (s *Server) removeRecordDir(dir string) error {
	gone, err := s.retireRecordDir(dir)
	if err != nil {
		return err
	}
	s.removeRetired(gone)
	return nil
}

// removeRetired removes the content of a retired record dir; what it cannot
// remove is left to the next start's sweep.
func (s *Server) removeRetired(gone string) {
	if gone == "" {
		return
	}
	if err := os.RemoveAll(gone); err != nil {
		s.log.WithError(err).WithField("dir", gone).Warn("cri: a removed record's files are left (the next start removes them)")
	}
}

// sweepRemoving removes what removals cut short left in the removing dir.
func (s *Server) sweepRemoving() {
	ents, err := os.ReadDir(s.removingDir())
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.log.WithError(err).Warn("cri: read the dir of removals under way")
		}
		return
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(s.removingDir(), e.Name())); err != nil {
			s.log.WithError(err).WithField("dir", e.Name()).Warn("cri: remove what a removal cut short left")
		}
	}
}
