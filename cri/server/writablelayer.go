package server

import (
	"errors"
	"io/fs"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/evjournal/containerd/image"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A container's writable layer is its overlay's upper dir: what it wrote
// to its rootfs. kubelet's ephemeral-storage limits and evictions read its
// bytes and inodes from ContainerStats.writable_layer. Measuring it is a
// walk of the dir (as du), which can be long for a container that wrote
// many files, so:
//
//   - a measure is kept and reused for layerMaxAge;
//   - an older one starts a new walk, at most layerWalkers walks at once
//     (a goroutine each, off the caller);
//   - a caller waits for the walk until its deadline (layerWait after the
//     call began) and otherwise answers the previous measure (none for a
//     container never measured yet): a call is never held by a big dir.

const (
	layerMaxAge  = 2 * time.Second
	layerWait    = 100 * time.Millisecond
	layerWalkers = 2
	// layerForget drops the measure of a container not asked about for
	// this long (removed).
	layerForget = 10 * time.Minute
)

// writableLayers is what the image store tells of writable layers.
// *image.Store has it; a store without it (a unit test's) gives none.
type writableLayers interface {
	UpperDir(containerID string) (string, error)
	FsInfo() (image.FsUsage, error)
}

type layerUsage struct {
	bytes, inodes uint64
	at            time.Time
}

type layerEntry struct {
	last    layerUsage
	have    bool
	running bool
	done    chan struct{} // closed when the running walk ends
	used    time.Time
}

type layerCache struct {
	store writableLayers // nil: no writable layers
	walk  func(dir string) (layerUsage, error)
	now   func() time.Time
	sem   chan struct{}

	mu        sync.Mutex
	m         map[string]*layerEntry
	lastSweep time.Time

	mountOnce sync.Once
	mount     string // the filesystem's mountpoint, as ImageFsInfo reports it
}

func newLayerCache(images ImageStore) *layerCache {
	c := &layerCache{walk: walkUsage, now: time.Now, sem: make(chan struct{}, layerWalkers), m: map[string]*layerEntry{}}
	c.store, _ = images.(writableLayers)
	return c
}

// get is id's writable layer usage, measured at most layerMaxAge ago when
// a walk finishes by deadline, else the last measure; ok is false when
// there is none.
func (c *layerCache) get(id string, deadline time.Time) (layerUsage, bool) {
	if c.store == nil {
		return layerUsage{}, false
	}
	c.mu.Lock()
	now := c.now()
	c.sweepLocked(now)
	e, ok := c.m[id]
	if !ok {
		e = &layerEntry{}
		c.m[id] = e
	}
	e.used = now
	if e.have && now.Sub(e.last.at) < layerMaxAge {
		defer c.mu.Unlock()
		return e.last, true
	}
	if !e.running {
		e.running, e.done = true, make(chan struct{})
		go c.refresh(id, e)
	}
	done := e.done
	c.mu.Unlock()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return e.last, e.have
}

// refresh measures id's upper dir, one of layerWalkers at a time.
func (c *layerCache) refresh(id string, e *layerEntry) {
	c.sem <- struct{}{}
	defer func() { <-c.sem }()
	var u layerUsage
	dir, err := c.store.UpperDir(id)
	if err == nil {
		u, err = c.walk(dir)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
		e.last, e.have = u, true
	case errors.Is(err, fs.ErrNotExist): // no rootfs (any more)
		e.have = false
	}
	e.running = false
	close(e.done)
}

func (c *layerCache) sweepLocked(now time.Time) {
	if now.Sub(c.lastSweep) < time.Minute {
		return
	}
	c.lastSweep = now
	for id, e := range c.m {
		if !e.running && now.Sub(e.used) > layerForget {
			delete(c.m, id)
		}
	}
}

// mountpoint is the filesystem the writable layers are on: the image
// store's, which ImageFsInfo reports (kubelet matches the two to find
// the capacity).
func (c *layerCache) mountpoint() string {
	c.mountOnce.Do(func() {
		if u, err := c.store.FsInfo(); err == nil {
			c.mount = u.Mountpoint
		}
	})
	return c.mount
}

// walkUsage is du of dir: the blocks of every file, dir and link under it
// (a file with several links once), and their count.
func walkUsage(dir string) (layerUsage, error) {
	var u layerUsage
	seen := map[uint64]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir || !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			return nil // removed by the container meanwhile
		}
		fi, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		if st.Nlink > 1 && !fi.IsDir() {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		u.bytes += uint64(st.Blocks) * 512
		u.inodes++
		return nil
	})
	u.at = time.Now()
	return u, err
}

// writableLayer is the CRI's form of id's writable layer; nil when there
// is no measure of it.
func (s *Server) writableLayer(id string, deadline time.Time) *runtimeapi.FilesystemUsage {
	u, ok := s.stats.layers.get(id, deadline)
	if !ok {
		return nil
	}
	return &runtimeapi.FilesystemUsage{Timestamp: u.at.UnixNano(),
		FsId:      &runtimeapi.FilesystemIdentifier{Mountpoint: s.stats.layers.mountpoint()},
		UsedBytes: &runtimeapi.UInt64Value{Value: u.bytes}, InodesUsed: &runtimeapi.UInt64Value{Value: u.inodes}}
}

var _ writableLayers = (*image.Store)(nil)
