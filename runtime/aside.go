package runtime

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// asideTimeLayout is the UTC time moveAside appends to a dir's name.
const asideTimeLayout = "20060102T150405.000000000Z"

// PruneAside removes the oldest dirs of Root/.aside beyond the newest keep
// (keep <= 0 removes none), and returns the names it removed. Set-aside
// state is kept for a person to inspect, but a daemon killed again and
// again while deleting containers sets aside a dir each time: without a
// bound they would fill the state dir's file system (a tmpfs on /run).
// Age is the time in the name (when the dir was set aside), else its
// modification time.
func PruneAside(root string, keep int) ([]string, error) {
	if keep <= 0 {
		return nil, nil
	}
	dirs, err := asideDirs(root)
	if err != nil || len(dirs) <= keep {
		return nil, err
	}
	var removed []string
	for _, d := range dirs[:len(dirs)-keep] {
		if err := os.RemoveAll(filepath.Join(asideDir(root), d.name)); err != nil {
			return removed, fmt.Errorf("prune %s: %w", asideDir(root), err)
		}
		removed = append(removed, d.name)
	}
	return removed, nil
}

type asideEntry struct {
	name string
	at   time.Time
}

// asideDirs lists the dirs of Root/.aside, oldest first.
func asideDirs(root string) ([]asideEntry, error) {
	entries, err := os.ReadDir(asideDir(root))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var dirs []asideEntry
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, asideEntry{name: e.Name(), at: asideTime(e)})
		}
	}
	sort.SliceStable(dirs, func(i, j int) bool { return dirs[i].at.Before(dirs[j].at) })
	return dirs, nil
}

// asideTime is when e was set aside: the time moveAside put at the end of
// its name, else its modification time.
func asideTime(e fs.DirEntry) time.Time {
	name := e.Name()
	if len(name) > len(asideTimeLayout) {
		if t, err := time.Parse(asideTimeLayout, name[len(name)-len(asideTimeLayout):]); err == nil {
			return t
		}
	}
	if fi, err := e.Info(); err == nil {
		return fi.ModTime()
	}
	return time.Time{}
}
