package image

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// FsUsage is what CRI's ImageFsInfo reports about the store.
type FsUsage struct {
	// Mountpoint is where the filesystem holding the store is mounted.
	Mountpoint string
	// UsedBytes and InodesUsed are what the store takes: the unpacked
	// layers (measured when each was unpacked) and the image records.
	// Containers' upper dirs are not counted: they are the containers'
	// writable layers, which CRI reports per container.
	UsedBytes  uint64
	InodesUsed uint64
	// CapacityBytes, AvailableBytes and InodesFree describe the whole
	// filesystem, from statfs.
	CapacityBytes  uint64
	AvailableBytes uint64
	InodesFree     uint64
}

// FsInfo returns the store's usage and the filesystem it lives on.
func (s *Store) FsInfo() (FsUsage, error) {
	var u FsUsage
	s.mu.Lock()
	for _, l := range s.layers {
		u.UsedBytes += l.DiskBytes
		u.InodesUsed += l.Inodes
	}
	s.mu.Unlock()
	// The record files are small and few; walking them is cheap.
	err := filepath.WalkDir(s.imagesDir(), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil {
			return nil // removed meanwhile
		}
		u.UsedBytes += uint64(st.Blocks) * 512
		u.InodesUsed++
		return nil
	})
	if err != nil {
		return u, fmt.Errorf("image store usage: %w", err)
	}
	if u.Mountpoint, err = mountpointOf(s.root); err != nil {
		return u, fmt.Errorf("image store usage: %w", err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(s.root, &st); err != nil {
		return u, fmt.Errorf("image store usage: statfs %s: %w", s.root, err)
	}
	u.CapacityBytes = st.Blocks * uint64(st.Bsize)
	u.AvailableBytes = st.Bavail * uint64(st.Bsize)
	u.InodesFree = st.Ffree
	return u, nil
}

// mountpointOf is the deepest mountpoint containing path.
func mountpointOf(path string) (string, error) {
	path, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	mounts, err := mountinfo.GetMounts(mountinfo.ParentsFilter(path))
	if err != nil {
		return "", err
	}
	best := "/"
	for _, m := range mounts {
		if len(m.Mountpoint) > len(best) && (path == m.Mountpoint || strings.HasPrefix(path, m.Mountpoint+"/")) {
			best = m.Mountpoint
		}
	}
	return best, nil
}
