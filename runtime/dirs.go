package runtime

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/internal/errmark"
	"github.com/sirupsen/logrus"
)

// ListIDs returns the container dirs under root, sorted. Files (the socket,
// events.log, logs), hidden dirs (.retired, .aside) and names that are not
// valid ids are skipped.
func ListIDs(root string) ([]string, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && ValidateID(e.Name()) == nil {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// SetAside renames Root/ID to Root/.aside/<id>.<time> and writes reason.txt
// in it. It never deletes data.
func SetAside(root, id, reason string) error {
	if err := ValidateID(id); err != nil {
		return err
	}
	src := filepath.Join(root, id)
	if _, err := os.Lstat(src); err != nil {
		return errmark.Mark(err, errdefs.ErrNotFound)
	}
	if left := liveProcesses(src); len(left) > 0 {
		logrus.WithFields(logrus.Fields{"container": id, "left_running": strings.Join(left, ", ")}).
			Error("container set aside while its processes still run: they are no longer supervised")
		reason += "; left running: " + strings.Join(left, ", ")
	}
	return moveAside(root, src, id, reason)
}

// liveProcesses names the processes of a container dir that still run
// ("init pid 123"), from whatever pid files can be read.
func liveProcesses(dir string) []string {
	var out []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !e.IsDir() || ValidateID(e.Name()) != nil {
			continue
		}
		ids := salvageIDs(logrus.WithField("container", filepath.Base(dir)), filepath.Join(dir, e.Name()))
		if sameProcess(ids.pid, ids.startTime) {
			out = append(out, fmt.Sprintf("%s pid %d", e.Name(), ids.pid))
		}
	}
	return out
}

func moveAside(root, src, name, reason string) error {
	if err := os.MkdirAll(asideDir(root), 0o700); err != nil {
		return err
	}
	dst := filepath.Join(asideDir(root), name+"."+time.Now().UTC().Format(asideTimeLayout))
	if err := os.Rename(src, dst); err != nil {
		return fmt.Errorf("set aside %s: %w", src, err)
	}
	if err := writeFileAtomic(filepath.Join(dst, "reason.txt"), []byte(reason+"\n"), 0o600); err != nil {
		return fmt.Errorf("set aside %s: moved to %s, but: %w", src, dst, err)
	}
	return syncDir(root)
}

// RetiredContainers loads every Root/.retired/<id>.<incarnation>: the
// containers whose init exited and whose Delete (and perhaps exit event) is
// still due. Each is loaded leniently (unloadable process dirs skipped);
// one whose state.json cannot be read is moved to Root/.aside with a reason.
func RetiredContainers(root string) ([]*Container, error) {
	entries, err := os.ReadDir(retiredDir(root))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*Container
	for _, e := range entries {
		if c := loadRetired(root, e); c != nil {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rec.Created.Before(out[j].rec.Created) })
	return out, nil
}

func loadRetired(root string, e fs.DirEntry) *Container {
	dir := filepath.Join(retiredDir(root), e.Name())
	c, err := loadContainer(root, dir, true)
	if err == nil && e.Name() != retiredName(c.rec.ID, c.rec.Incarnation) {
		c.closeProcesses()
		err = fmt.Errorf("%s holds container %q incarnation %s", dir, c.rec.ID, c.rec.Incarnation)
	}
	if err == nil {
		return c
	}
	log := logrus.WithField("dir", dir).WithError(err)
	name := strings.TrimPrefix(e.Name(), ".")
	if aerr := moveAside(root, dir, "retired-"+name, "unloadable retired container: "+err.Error()); aerr != nil {
		log = log.WithField("aside", aerr)
	}
	log.Warn("retired container set aside")
	return nil
}
