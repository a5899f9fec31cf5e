package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/bundle"
)

// checkpointMarker is the file a Checkpoint writes into the image dir. Its
// presence (naming the checkpoint) is what DeleteCheckpoint requires before
// it removes a client-named dir as root.
const checkpointMarker = "containerd-checkpoint.json"

// maxCheckpointRecord bounds the reads of a checkpoint's small JSON files,
// which are client-named paths.
const maxCheckpointRecord = 64 << 10

type checkpointMark struct {
	Checkpoint string `json:"checkpoint"`
	WrittenBy  string `json:"writtenBy"`
}

func markerOf(name string) checkpointMark {
	return checkpointMark{Checkpoint: name, WrittenBy: "containerd"}
}

// checkMarker says whether path is a directory (not a symlink) holding the
// marker of checkpoint name. A missing path is fs.ErrNotExist.
func checkMarker(path, name string) error {
	st, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return notOurs(path, "it is not a directory")
	}
	var m checkpointMark
	if err := readClientJSON(filepath.Join(path, checkpointMarker), &m); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return notOurs(path, "it holds no "+checkpointMarker)
		}
		return notOurs(path, err.Error())
	}
	if m != markerOf(name) {
		return notOurs(path, checkpointMarker+" names another checkpoint")
	}
	return nil
}

func notOurs(path, why string) error {
	return fmt.Errorf("%s is not a checkpoint this daemon wrote (%s); not removed: %w", path, why, errdefs.ErrFailedPrecondition)
}

// readClientJSON reads a small JSON file at a client-named path: regular
// files only, without blocking, bounded (bundle.ReadFile).
func readClientJSON(path string, v any) error {
	data, err := bundle.ReadFile(path, maxCheckpointRecord)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: invalid JSON: %w", path, err)
	}
	return nil
}
