package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs"
	"github.com/opencontainers/cgroups/fs2"
	"github.com/opencontainers/cgroups/fscommon"
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

// forMetrics asks read for the figures only the metrics give too: user and
// system CPU time, CFS throttling, max usage, failcnt, OOM kills (four
// more files on v1).
const forMetrics cgroups.Controller = 1 << 30

// cgroupDirs are a cgroup's host dirs: v1's by controller, v2's one.
type cgroupDirs struct {
	cpu, cpuacct, memory, pids string // v1
	unified                    string // v2
}

// hostCgroups reads the host's cgroups, v1 or v2. The library resolves a
// path into dirs, once per path (v1 looks up each controller's mount);
// the reads take only the files the CRI's figures need: the library's
// managers would read about 30 files a container on v1 (per-CPU usage,
// NUMA stats, kernel memory, PSI), several times the cost.
type hostCgroups struct {
	v2 bool
	mu sync.Mutex
	m  map[string]cgroupDirs // by cgroupsPath; reset when it grows past maxCachedCgroups
}

const maxCachedCgroups = 4096

func newHostCgroups() *hostCgroups {
	return &hostCgroups{v2: cgroups.IsCgroup2UnifiedMode(), m: map[string]cgroupDirs{}}
}

func (h *hostCgroups) dirs(p string) (cgroupDirs, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if d, ok := h.m[p]; ok {
		return d, nil
	}
	cg := &cgroups.Cgroup{Path: p, Resources: &cgroups.Resources{}}
	var d cgroupDirs
	if h.v2 {
		m, err := fs2.NewManager(cg, "")
		if err != nil {
			return d, err
		}
		d.unified = m.Path("")
	} else {
		m, err := fs.NewManager(cg, nil)
		if err != nil {
			return d, err
		}
		d.cpu, d.cpuacct, d.memory, d.pids = m.Path("cpu"), m.Path("cpuacct"), m.Path("memory"), m.Path("pids")
	}
	if len(h.m) >= maxCachedCgroups {
		h.m = map[string]cgroupDirs{}
	}
	h.m[p] = d
	return d, nil
}

func (h *hostCgroups) forget(p string) {
	h.mu.Lock()
	delete(h.m, p)
	h.mu.Unlock()
}

// exists tells a cgroup that is gone: v1 by its memory dir (cpuacct's
// where memory is not mounted), v2 by its dir.
func (d cgroupDirs) exists() bool {
	for _, dir := range []string{d.unified, d.memory, d.cpuacct} {
		if dir != "" {
			return cgroups.PathExists(dir)
		}
	}
	return false
}

func (h *hostCgroups) read(p string, want cgroups.Controller) (cgroupSample, error) {
	d, err := h.dirs(p)
	if err != nil {
		return cgroupSample{}, fmt.Errorf("cgroup %s: %w", p, err)
	}
	if !d.exists() {
		h.forget(p)
		return cgroupSample{}, fmt.Errorf("cgroup %s: %w", p, errCgroupGone)
	}
	out := cgroupSample{Stats: cgroups.NewStats(), V2: h.v2, At: time.Now()}
	if h.v2 {
		err = readV2(d.unified, want, &out)
	} else {
		err = readV1(d, want, &out)
	}
	if err != nil {
		if !d.exists() { // removed while it was read
			h.forget(p)
			return cgroupSample{}, fmt.Errorf("cgroup %s: %w", p, errCgroupGone)
		}
		return cgroupSample{}, fmt.Errorf("cgroup %s: %w", p, err)
	}
	return out, nil
}

// userHZ is the unit of cpuacct.stat: USER_HZ, 100 on every Linux ABI.
const userHZ = 100

func readV1(d cgroupDirs, want cgroups.Controller, out *cgroupSample) error {
	if want&cgroups.CPU != 0 && d.cpuacct != "" {
		if err := readV1CPU(d, want, out.Stats); err != nil {
			return err
		}
	}
	if want&cgroups.Memory != 0 && d.memory != "" {
		if err := readV1Memory(d.memory, want, out); err != nil {
			return err
		}
	}
	if want&cgroups.Pids != 0 && d.pids != "" {
		v, err := fscommon.GetCgroupParamUint(d.pids, "pids.current")
		if err != nil {
			return err
		}
		out.PidsStats.Current = v
	}
	return nil
}

func readV1CPU(d cgroupDirs, want cgroups.Controller, st *cgroups.Stats) error {
	v, err := fscommon.GetCgroupParamUint(d.cpuacct, "cpuacct.usage")
	if err != nil {
		return err
	}
	st.CpuStats.CpuUsage.TotalUsage = v
	if want&forMetrics == 0 {
		return nil
	}
	if err := readKeys(d.cpuacct, "cpuacct.stat", func(k string, v uint64) {
		switch k {
		case "user":
			st.CpuStats.CpuUsage.UsageInUsermode = v * (uint64(time.Second) / userHZ)
		case "system":
			st.CpuStats.CpuUsage.UsageInKernelmode = v * (uint64(time.Second) / userHZ)
		}
	}); err != nil {
		return err
	}
	if d.cpu == "" {
		return nil
	}
	err = readKeys(d.cpu, "cpu.stat", func(k string, v uint64) {
		switch k {
		case "nr_periods":
			st.CpuStats.ThrottlingData.Periods = v
		case "nr_throttled":
			st.CpuStats.ThrottlingData.ThrottledPeriods = v
		case "throttled_time":
			st.CpuStats.ThrottlingData.ThrottledTime = v
		}
	})
	if errors.Is(err, os.ErrNotExist) { // a kernel without CFS bandwidth control
		return nil
	}
	return err
}

func readV1Memory(dir string, want cgroups.Controller, out *cgroupSample) error {
	m := &out.MemoryStats
	if err := readKeys(dir, "memory.stat", func(k string, v uint64) { m.Stats[k] = v }); err != nil {
		return err
	}
	m.Cache = m.Stats["cache"]
	var err error
	if m.Usage.Usage, err = fscommon.GetCgroupParamUint(dir, "memory.usage_in_bytes"); err != nil {
		return err
	}
	if m.Usage.Limit, err = fscommon.GetCgroupParamUint(dir, "memory.limit_in_bytes"); err != nil {
		return err
	}
	// Absent without swap accounting: no swap figure (zero limit).
	m.SwapUsage.Usage, _ = fscommon.GetCgroupParamUint(dir, "memory.memsw.usage_in_bytes")
	m.SwapUsage.Limit, _ = fscommon.GetCgroupParamUint(dir, "memory.memsw.limit_in_bytes")
	if want&forMetrics != 0 {
		m.Usage.MaxUsage, _ = fscommon.GetCgroupParamUint(dir, "memory.max_usage_in_bytes")
		m.Usage.Failcnt, _ = fscommon.GetCgroupParamUint(dir, "memory.failcnt")
		out.OOMKills, _ = fs.OOMKillCount(dir) // a kernel without the counter: 0
	}
	return nil
}

func readV2(dir string, want cgroups.Controller, out *cgroupSample) error {
	st := out.Stats
	if want&cgroups.CPU != 0 {
		// cpu.stat is there whether the cpu controller is enabled or not.
		if err := readKeys(dir, "cpu.stat", func(k string, v uint64) {
			switch k {
			case "usage_usec":
				st.CpuStats.CpuUsage.TotalUsage = v * 1000
			case "user_usec":
				st.CpuStats.CpuUsage.UsageInUsermode = v * 1000
			case "system_usec":
				st.CpuStats.CpuUsage.UsageInKernelmode = v * 1000
			case "nr_periods":
				st.CpuStats.ThrottlingData.Periods = v
			case "nr_throttled":
				st.CpuStats.ThrottlingData.ThrottledPeriods = v
			case "throttled_usec":
				st.CpuStats.ThrottlingData.ThrottledTime = v * 1000
			}
		}); err != nil {
			return err
		}
		st.CpuStats.PSI = readPSI(dir, "cpu.pressure")
	}
	if want&cgroups.Memory != 0 {
		if err := readV2Memory(dir, want, out); err != nil {
			return err
		}
		st.MemoryStats.PSI = readPSI(dir, "memory.pressure")
	}
	if want&cgroups.IO != 0 {
		st.BlkioStats.PSI = readPSI(dir, "io.pressure")
	}
	if want&cgroups.Pids != 0 {
		v, err := fscommon.GetCgroupParamUint(dir, "pids.current")
		if err != nil && !errors.Is(err, os.ErrNotExist) { // the pids controller not enabled here
			return err
		}
		st.PidsStats.Current = v
	}
	return nil
}

func readV2Memory(dir string, want cgroups.Controller, out *cgroupSample) error {
	m := &out.MemoryStats
	err := readKeys(dir, "memory.stat", func(k string, v uint64) { m.Stats[k] = v })
	if errors.Is(err, os.ErrNotExist) { // the memory controller not enabled here
		return nil
	}
	if err != nil {
		return err
	}
	m.Cache = m.Stats["file"]
	if m.Usage.Usage, err = fscommon.GetCgroupParamUint(dir, "memory.current"); err != nil {
		return err
	}
	if m.Usage.Limit, err = fscommon.GetCgroupParamUint(dir, "memory.max"); err != nil {
		return err
	}
	m.SwapOnlyUsage.Usage, _ = fscommon.GetCgroupParamUint(dir, "memory.swap.current")
	m.SwapOnlyUsage.Limit, _ = fscommon.GetCgroupParamUint(dir, "memory.swap.max")
	if want&forMetrics != 0 {
		m.Usage.MaxUsage, _ = fscommon.GetCgroupParamUint(dir, "memory.peak") // Linux 5.19
		out.OOMKills, _ = fs2.OOMKillCount(dir)
	}
	return nil
}

// readPSI reads a v2 pressure file ("some avg10=0.00 avg60=0.00
// avg300=0.00 total=0", then "full ..."); nil when the kernel gives none
// (no file, or PSI disabled: EOPNOTSUPP) or it cannot be parsed.
func readPSI(dir, file string) *cgroups.PSIStats {
	data, err := cgroups.ReadFile(dir, file)
	if err != nil {
		return nil
	}
	out := &cgroups.PSIStats{}
	for line := range strings.Lines(data) {
		f := strings.Fields(line)
		if len(f) != 5 {
			return nil
		}
		var d *cgroups.PSIData
		switch f[0] {
		case "some":
			d = &out.Some
		case "full":
			d = &out.Full
		default:
			return nil
		}
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			var err error
			switch k {
			case "avg10":
				d.Avg10, err = strconv.ParseFloat(v, 64)
			case "avg60":
				d.Avg60, err = strconv.ParseFloat(v, 64)
			case "avg300":
				d.Avg300, err = strconv.ParseFloat(v, 64)
			case "total":
				d.Total, err = strconv.ParseUint(v, 10, 64)
			}
			if err != nil {
				return nil
			}
		}
	}
	return out
}

// readKeys reads a cgroup file of "key value" lines.
func readKeys(dir, file string, f func(string, uint64)) error {
	data, err := cgroups.ReadFile(dir, file)
	if err != nil {
		return err
	}
	for line := range strings.Lines(data) {
		k, v, err := fscommon.ParseKeyValue(strings.TrimSpace(line))
		if err != nil {
			return fmt.Errorf("%s/%s: %w", dir, file, err)
		}
		f(k, v)
	}
	return nil
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
