package runtime

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/evjournal/containerd/bundle"
	"github.com/moby/sys/mountinfo"
	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fscommon"
)

// OOMCgroups returns init's memory cgroup dirs for the OOM monitor: the
// cgroup v1 memory dir (holding memory.oom_control) and the cgroup v2 dir
// (holding memory.events), found from /proc/<pid>/cgroup and this process's
// /proc/self/mountinfo. A dir is "" when unknown or without those files.
// The dirs the shim recorded with the counters before it started the init
// (OOMBaseline) come first: they were read while the init was surely alive,
// and an init OOM-killed in its first milliseconds, before the watch is
// armed, is already out of its cgroup.
func (c *Container) OOMCgroups() (v1Dir, v2Dir string) {
	v1, v2 := c.baselineDirs()
	if v1 == "" && v2 == "" {
		v1, v2 = c.initCgroup("memory")
	}
	if v1 != "" && !exists(filepath.Join(v1, "memory.oom_control")) {
		v1 = ""
	}
	if v2 != "" && !exists(filepath.Join(v2, "memory.events")) {
		v2 = ""
	}
	return v1, v2
}

// initCgroup returns the host dirs of the running init's cgroup for a
// controller: in its v1 hierarchy, and in the v2 (unified) one.
//
// Once found they are kept: runc never moves a container's init to another
// cgroup, and finding them parses this process's mountinfo, which cost
// every State call that much per container (the callers check the files
// they read still exist: a deleted cgroup shows as missing files).
func (c *Container) initCgroup(controller string) (v1Dir, v2Dir string) {
	p, ok := c.Process(initID)
	if !ok || p.pid == 0 || p.State() == Stopped {
		return "", ""
	}
	c.cgMu.Lock()
	dirs, known := c.cgDirs[controller]
	c.cgMu.Unlock()
	if known {
		return dirs[0], dirs[1]
	}
	v1Dir, v2Dir = cgroupDirs(p.pid, controller)
	if !notExiting(p.pid, p.startTime) { // reused while reading, or already out of its cgroups
		return "", ""
	}
	if v1Dir != "" || v2Dir != "" {
		c.cgMu.Lock()
		if c.cgDirs == nil {
			c.cgDirs = map[string][2]string{}
		}
		c.cgDirs[controller] = [2]string{v1Dir, v2Dir}
		c.cgMu.Unlock()
	}
	return v1Dir, v2Dir
}

// cgroupDirs finds pid's cgroup dirs for controller on this host, from
// /proc/<pid>/cgroup and our mountinfo.
func cgroupDirs(pid int, controller string) (v1Dir, v2Dir string) {
	paths, err := cgroups.ParseCgroupFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return "", ""
	}
	mounts, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup", "cgroup2"))
	if err != nil {
		return "", ""
	}
	return resolveCgroup(paths, mounts, controller)
}

// resolveCgroup maps a process's cgroup paths (by v1 controller, and under
// "" in the v2 hierarchy, as cgroups.ParseCgroupFile gives them) onto the
// cgroup mounts. The v2 dir is given whatever the controller: whether v2
// runs it shows in its files.
func resolveCgroup(paths map[string]string, mounts []*mountinfo.Info, controller string) (v1Dir, v2Dir string) {
	path, inV1 := paths[controller]
	v2Path, inV2 := paths[""]
	for _, m := range mounts {
		switch {
		case m.FSType == "cgroup" && inV1 && v1Dir == "" && slices.Contains(strings.Split(m.VFSOptions, ","), controller):
			v1Dir = underMount(m, path)
		case m.FSType == "cgroup2" && inV2 && v2Dir == "":
			v2Dir = underMount(m, v2Path)
		}
	}
	return v1Dir, v2Dir
}

// underMount is the host dir of cgroup path p in mount m, or "" if p is not
// visible through m (a mount of a sub-tree, as in a cgroup namespace).
func underMount(m *mountinfo.Info, p string) string {
	rel, err := filepath.Rel(m.Root, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return ""
	}
	return filepath.Join(m.Mountpoint, rel)
}

// hugetlbLimits reads the limit of each page size (as runc names them:
// "2MB", "1GB") from init's hugetlb cgroup; nil when none is readable.
func (c *Container) hugetlbLimits(sizes []string) map[string]uint64 {
	v1, v2 := c.initCgroup("hugetlb")
	return readHugetlbLimits(v1, v2, sizes)
}

func readHugetlbLimits(v1, v2 string, sizes []string) map[string]uint64 {
	var out map[string]uint64
	for _, size := range sizes {
		limit, ok := readLimit(v1, "hugetlb."+size+".limit_in_bytes")
		if !ok {
			limit, ok = readLimit(v2, "hugetlb."+size+".max")
		}
		if ok {
			if out == nil {
				out = map[string]uint64{}
			}
			out[size] = limit
		}
	}
	return out
}

// readLimit reads a cgroup limit file; v2's "max" is the largest uint64.
func readLimit(dir, name string) (uint64, bool) {
	if dir == "" {
		return 0, false
	}
	n, err := fscommon.GetCgroupParamUint(dir, name)
	return n, err == nil
}

// cgroupPids lists the processes of the container from its cgroup (pids
// controller in v1, else the unified hierarchy), sub-cgroups included: what
// `runc ps` reads, without a runc run per container (State lists every
// container, and a restarted daemon's first State must be fast).
func (c *Container) cgroupPids() ([]int, bool) {
	v1, v2 := c.initCgroup("pids")
	dir := v1
	if dir == "" {
		dir = v2
	}
	if dir == "" || !exists(filepath.Join(dir, "cgroup.procs")) {
		return nil, false
	}
	pids, err := cgroups.GetAllPids(dir)
	return pids, err == nil
}

// Paused reports whether the container's init is frozen now (cgroup v1
// freezer.state FROZEN or FREEZING, or v2 cgroup.freeze 1): what a restarted
// daemon reports instead of assuming "running". A read is bounded, and an
// unknown cgroup is "not paused".
func (c *Container) Paused() bool {
	v1, v2 := c.initCgroup("freezer")
	if v1 != "" {
		if data, err := bundle.ReadFile(filepath.Join(v1, "freezer.state"), 64); err == nil {
			st := strings.TrimSpace(string(data))
			return st == "FROZEN" || st == "FREEZING"
		}
	}
	if v2 != "" {
		if data, err := bundle.ReadFile(filepath.Join(v2, "cgroup.freeze"), 64); err == nil {
			return strings.TrimSpace(string(data)) == "1"
		}
	}
	return false
}

// oomBaselineFile is where a shim that ran `runc start` itself left the OOM
// counters it read just before (docs/shim-contract.md): one "<counter file>
// <oom_kill>" line per memory hierarchy.
const oomBaselineFile = "oom-baseline"

// OOMBaseline is the oom_kill counter of the memory cgroup dir (one of
// OOMCgroups) as the shim read it before it started the init; ok is false
// without one (a separate Start, an old shim, a dir the shim did not find):
// the OOM watch then counts from its own first read.
func (c *Container) OOMBaseline(dir string) (count uint64, ok bool) {
	if dir == "" {
		return 0, false
	}
	for _, b := range c.oomBaselines() {
		if filepath.Dir(b.file) == filepath.Clean(dir) {
			return b.count, true
		}
	}
	return 0, false
}

// baselineDirs are the memory cgroup dirs named in the shim's oomBaselineFile.
func (c *Container) baselineDirs() (v1Dir, v2Dir string) {
	for _, b := range c.oomBaselines() {
		switch filepath.Base(b.file) {
		case "memory.oom_control":
			v1Dir = filepath.Dir(b.file)
		case "memory.events":
			v2Dir = filepath.Dir(b.file)
		}
	}
	return v1Dir, v2Dir
}

type oomBaseline struct {
	file  string
	count uint64
}

// oomBaselines reads the init's oomBaselineFile; nil when there is none.
func (c *Container) oomBaselines() []oomBaseline {
	p, found := c.Process(initID)
	if !found {
		return nil
	}
	data, err := bundle.ReadFile(filepath.Join(p.dir(), oomBaselineFile), 4096)
	if err != nil {
		return nil
	}
	var out []oomBaseline
	for line := range strings.Lines(string(data)) {
		file, value, found := strings.Cut(strings.TrimSpace(line), " ")
		n, err := strconv.ParseUint(value, 10, 64)
		if found && err == nil && filepath.IsAbs(file) {
			out = append(out, oomBaseline{file: filepath.Clean(file), count: n})
		}
	}
	return out
}
