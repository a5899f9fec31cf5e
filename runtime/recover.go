package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/evjournal/containerd/bundle"
	"github.com/sirupsen/logrus"
)

// RecoverHint is what the daemon knows of a container whose state.json is
// lost: its own defaults and, from the journal, the incarnation its last
// start-container event carried.
type RecoverHint struct {
	Runtime     string
	RuntimeArgs []string
	Shim        string
	Incarnation string // "" = unknown; a new one is made
}

// recoverTimeout bounds the runtime's state call during a recovery.
const recoverTimeout = 10 * time.Second

// Recover rebuilds Root/ID when its state.json cannot be read (damaged,
// replaced by a FIFO, gone): the record is rebuilt from the hint, the
// runtime's own state (bundle, creation time) and the bundle's config.json
// (read bounded, as at create), and the process dirs are loaded as Load
// does. The damaged state.json is kept as state.json.damaged and a new one
// written, so the next restart loads normally. What is lost (labels, the
// stdio paths of a damaged process.json) is logged. It fails only when no
// init process can be found: nothing to supervise.
func Recover(root, id string, h RecoverHint) (*Container, error) {
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	dir := filepath.Join(root, id)
	c := &Container{root: root, rec: recoveredRecord(dir, id, h), processes: map[string]*Process{}}
	c.fillFromRuntime(dir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("recover container %q: %w", id, err)
	}
	for _, e := range entries {
		if err := c.loadEntry(dir, e, true); err != nil {
			c.closeProcesses()
			return nil, err
		}
	}
	if _, ok := c.Process(initID); !ok {
		c.closeProcesses()
		return nil, fmt.Errorf("recover container %q: %s unreadable and no init process found", id, stateFile)
	}
	if err := c.saveRecovered(dir); err != nil {
		logrus.WithField("container", id).WithError(err).Warn("recovered container: cannot rewrite state.json; recovered again at the next restart")
	}
	logrus.WithFields(logrus.Fields{"container": id, "bundle": c.rec.Bundle, "incarnation": c.rec.Incarnation}).
		Warn("container state.json was damaged: rebuilt from the runtime's state, the journal and the process dirs; its labels are lost")
	return c, nil
}

func recoveredRecord(dir, id string, h RecoverHint) containerRecord {
	rec := containerRecord{ID: id, Runtime: h.Runtime, RuntimeArgs: h.RuntimeArgs, Shim: h.Shim,
		Incarnation: h.Incarnation, StartTimeout: DefaultStartTimeout}
	if rec.Runtime == "" {
		rec.Runtime = DefaultRuntime
	}
	if rec.Shim == "" {
		rec.Shim = DefaultShim
	}
	if rec.Incarnation == "" {
		rec.Incarnation = randomHex(8)
	}
	if st, err := os.Stat(dir); err == nil {
		rec.Created = st.ModTime().UTC()
	}
	return rec
}

// fillFromRuntime takes the bundle and creation time from the runtime's
// state, and the spec from the bundle, when they can be had. A runtime that
// runs the daemon's translated bundle reports that one: the client's is
// read from it, and the spec keeps the translation's dialect.
func (c *Container) fillFromRuntime(dir string) {
	ctx, cancel := context.WithTimeout(context.Background(), recoverTimeout)
	defer cancel()
	st, err := c.runc().State(ctx, c.rec.ID)
	if err != nil {
		logrus.WithField("container", c.rec.ID).WithError(err).Warn("recovering container: no runtime state; bundle unknown")
		return
	}
	c.rec.Bundle, c.rec.Created = st.Bundle, st.Created.UTC()
	if client, ok := clientBundle(dir, st.Bundle); ok {
		c.rec.Bundle, c.rec.Translated = client, true
	}
	cfg, err := bundle.ReadConfig(c.rec.Bundle)
	if err != nil {
		return
	}
	if c.rec.Translated {
		cfg.Dialect = RuntimeFeatures(c.rec.Runtime).Dialect()
	}
	c.rec.Spec = cfg
}

// saveRecovered keeps the damaged state.json aside (in the container dir)
// and writes the rebuilt one.
func (c *Container) saveRecovered(dir string) error {
	path := filepath.Join(dir, stateFile)
	if err := os.Rename(path, path+".damaged"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return writeJSON(path, &c.rec)
}
