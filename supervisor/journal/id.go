package journal

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// idFile holds the journal's identity, next to its events. It is written
// (atomically, directory synced) BEFORE a new journal's first file is
// created, so a crash in between makes the next start create a new id again;
// and it is replaced whenever the events are found missing, so a journal
// recreated after its events were lost never passes for the old one.
const idFile = "journal.id"

// newID returns 128 random bits in hex.
func newID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("journal id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// readID returns the persisted id, or "" when there is none or it is not a
// well-formed id (then a new one is made: a damaged id must not match a
// client's cursor by accident).
func readID(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, idFile))
	if err != nil {
		return ""
	}
	id := strings.TrimSpace(string(b))
	if _, err := hex.DecodeString(id); err != nil || len(id) != 32 {
		return ""
	}
	return id
}

// writeID persists id crash-safely: temp file, fsync, rename, directory fsync.
func (j *Journal) writeID(id string) error {
	tmp, err := j.opts.fs.CreateTemp(j.dir, "."+idFile+"-*")
	if err != nil {
		return fmt.Errorf("create journal id file: %w", err)
	}
	_, err = tmp.Write([]byte(id + "\n"))
	if err == nil {
		err = tmp.Sync()
	}
	err = errors.Join(err, tmp.Close())
	if err == nil {
		err = j.opts.fs.Rename(tmp.Name(), filepath.Join(j.dir, idFile))
	}
	if err == nil {
		err = j.opts.fs.SyncDir(j.dir)
	}
	if err != nil {
		_ = j.opts.fs.Remove(tmp.Name())
		return fmt.Errorf("write journal id in %s: %w", j.dir, err)
	}
	return nil
}

// ID returns the journal's identity: made when the journal was created,
// unchanged by restarts and compaction, new when the journal had to be
// recreated (its events lost). A sequence number means something only
// together with this id.
func (j *Journal) ID() string { return j.id }
