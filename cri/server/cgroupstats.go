package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs"
	"github.com/opencontainers/cgroups/fs2"
)

// The stats calls read the cgroup files themselves (the opencontainers
// cgroups library runc uses, so paths resolve exactly as runc made them):
// no runc process per container, no trip through the supervisor's loop
// per container. A container's cgroup is its OCI spec's linux.cgroupsPath
// (read once from its bundle); a pod's is its cgroup_parent.

// cgroupSample is one read of a cgroup's counters.
type cgroupSample struct {
	*cgroups.Stats
	// V2 tells the unified hierarchy's memory.stat keys from v1's.
	V2 bool
	// OOMKills is the memory cgroup's oom_kill count (metrics only).
	OOMKills uint64
	At       time.Time
}

// errCgroupGone: the cgroup does not exist (any more).
var errCgroupGone = errors.New("cgroup does not exist")

// cgroupReader reads cgroups by their cgroupsPath; the host's is
// hostCgroups, the unit tests give a fake.
type cgroupReader interface {
	read(cgroupsPath string, want cgroups.Controller) (cgroupSample, error)
}

// statsManager is what both of the library's managers (v1 fs, v2 fs2) give.
type statsManager interface {
	Stats(*cgroups.StatsOptions) (*cgroups.Stats, error)
	OOMKillCount() (uint64, error)
}

// hostCgroups reads the host's cgroups, v1 or v2, keeping one manager per
// path (resolving a v1 path looks up each controller's mountpoint).
type hostCgroups struct {
	v2 bool
	mu sync.Mutex
	m  map[string]statsManager // by cgroupsPath; reset when it grows past maxCachedCgroups
}

const maxCachedCgroups = 4096

func newHostCgroups() *hostCgroups {
	return &hostCgroups{v2: cgroups.IsCgroup2UnifiedMode(), m: map[string]statsManager{}}
}

func (h *hostCgroups) manager(p string) (statsManager, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if m, ok := h.m[p]; ok {
		return m, nil
	}
	cg := &cgroups.Cgroup{Path: p, Resources: &cgroups.Resources{}}
	var m statsManager
	var err error
	if h.v2 {
		m, err = fs2.NewManager(cg, "")
	} else {
		m, err = fs.NewManager(cg, nil)
	}
	if err != nil {
		return nil, err
	}
	if len(h.m) >= maxCachedCgroups {
		h.m = map[string]statsManager{}
	}
	h.m[p] = m
	return m, nil
}

// forget drops the manager of a cgroup that is gone.
func (h *hostCgroups) forget(p string) {
	h.mu.Lock()
	delete(h.m, p)
	h.mu.Unlock()
}

// exists: the library reads a missing v1 controller dir as zeros, so a
// cgroup that is gone must be told apart first. v1: the memory dir (or
// cpuacct's, where memory is not mounted); v2: the cgroup's dir.
func (h *hostCgroups) exists(m statsManager) bool {
	switch m := m.(type) {
	case *fs.Manager:
		for _, c := range []string{"memory", "cpuacct"} {
			if p := m.Path(c); p != "" {
				return cgroups.PathExists(p)
			}
		}
		return false
	case *fs2.Manager:
		return m.Exists()
	}
	return true
}

func (h *hostCgroups) read(p string, want cgroups.Controller) (cgroupSample, error) {
	m, err := h.manager(p)
	if err != nil {
		return cgroupSample{}, fmt.Errorf("cgroup %s: %w", p, err)
	}
	if !h.exists(m) {
		h.forget(p)
		return cgroupSample{}, fmt.Errorf("cgroup %s: %w", p, errCgroupGone)
	}
	st, err := m.Stats(&cgroups.StatsOptions{Controllers: want})
	if err != nil {
		if !h.exists(m) { // removed while it was read
			h.forget(p)
			return cgroupSample{}, fmt.Errorf("cgroup %s: %w", p, errCgroupGone)
		}
		return cgroupSample{}, fmt.Errorf("cgroup %s: %w", p, err)
	}
	out := cgroupSample{Stats: st, V2: h.v2, At: time.Now()}
	if want&cgroups.Memory != 0 {
		out.OOMKills, _ = m.OOMKillCount() // a kernel without the counter: 0
	}
	return out, nil
}

// cgroupPaths caches each CRI object's cgroupsPath, read from its bundle's
// config.json: it never changes once the object exists.
type cgroupPaths struct {
	mu sync.Mutex
	m  map[string]string // by object id
}

func (c *cgroupPaths) get(id, bundle string) (string, error) {
	c.mu.Lock()
	p, ok := c.m[id]
	c.mu.Unlock()
	if ok {
		return p, nil
	}
	p, err := specCgroupsPath(filepath.Join(bundle, "config.json"))
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCachedCgroups {
		c.m = map[string]string{}
	}
	c.m[id] = p
	c.mu.Unlock()
	return p, nil
}

func (c *cgroupPaths) forget(id string) {
	c.mu.Lock()
	delete(c.m, id)
	c.mu.Unlock()
}

// specCgroupsPath reads linux.cgroupsPath from an OCI spec file.
func specCgroupsPath(file string) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("%s: %w", file, errdefs.ErrNotFound)
		}
		return "", err
	}
	var spec struct {
		Linux *struct {
			CgroupsPath string `json:"cgroupsPath"`
		} `json:"linux"`
	}
	if err := json.Unmarshal(data, &spec); err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	if spec.Linux == nil || spec.Linux.CgroupsPath == "" {
		return "", fmt.Errorf("%s: no linux.cgroupsPath: %w", file, errdefs.ErrNotFound)
	}
	return path.Clean(spec.Linux.CgroupsPath), nil
}
