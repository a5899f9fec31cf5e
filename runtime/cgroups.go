package runtime

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// OOMCgroups returns init's memory cgroup dirs for the OOM monitor: the
// cgroup v1 memory dir (holding memory.oom_control) and the cgroup v2 dir
// (holding memory.events), found from /proc/<pid>/cgroup and this process's
// /proc/self/mountinfo. A dir is "" when unknown or without those files.
func (c *Container) OOMCgroups() (v1Dir, v2Dir string) {
	v1, v2 := c.initCgroup("memory")
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
func (c *Container) initCgroup(controller string) (v1Dir, v2Dir string) {
	p, ok := c.Process(initID)
	if !ok || p.pid == 0 || p.State() == Stopped {
		return "", ""
	}
	v1Dir, v2Dir = cgroupDirs(p.pid, controller)
	if !sameProcess(p.pid, p.startTime) { // the pid may have been reused while reading
		return "", ""
	}
	return v1Dir, v2Dir
}

func cgroupDirs(pid int, controller string) (v1Dir, v2Dir string) {
	cg, err := os.Open("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return "", ""
	}
	defer cg.Close()
	mi, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", ""
	}
	defer mi.Close()
	return resolveCgroup(parseProcCgroup(cg), parseMountinfo(mi), controller)
}

// procCgroups is /proc/<pid>/cgroup: the path in each v1 hierarchy, by
// controller, and the path in the v2 (unified) hierarchy ("" when absent).
type procCgroups struct {
	v1 map[string]string
	v2 string
}

func parseProcCgroup(r io.Reader) procCgroups {
	out := procCgroups{v1: map[string]string{}}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		switch {
		case len(parts) != 3:
		case parts[0] == "0" && parts[1] == "":
			out.v2 = parts[2]
		default:
			for _, ctl := range strings.Split(parts[1], ",") {
				out.v1[ctl] = parts[2]
			}
		}
	}
	return out
}

// cgroupMount is one cgroup filesystem from mountinfo.
type cgroupMount struct {
	root, point string // root of the mount within its filesystem; mount point
	v2          bool
	controllers string // a v1 mount's super options (rw,memory,...)
}

func parseMountinfo(r io.Reader) []cgroupMount {
	var out []cgroupMount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		sep := indexOf(f, "-")
		if sep < 6 || len(f) < sep+4 {
			continue
		}
		fstype := f[sep+1]
		if fstype != "cgroup" && fstype != "cgroup2" {
			continue
		}
		out = append(out, cgroupMount{root: unescapeMount(f[3]), point: unescapeMount(f[4]),
			v2: fstype == "cgroup2", controllers: f[sep+3]})
	}
	return out
}

// resolveCgroup maps the process's cgroup paths onto the mounts. The v2 dir
// is given whatever the controller: whether v2 runs it shows in its files.
func resolveCgroup(pc procCgroups, mounts []cgroupMount, controller string) (v1Dir, v2Dir string) {
	path, inV1 := pc.v1[controller]
	for _, m := range mounts {
		switch {
		case !m.v2 && inV1 && v1Dir == "" && hasWord(m.controllers, controller, ","):
			v1Dir = underMount(m, path)
		case m.v2 && pc.v2 != "" && v2Dir == "":
			v2Dir = underMount(m, pc.v2)
		}
	}
	return v1Dir, v2Dir
}

// underMount is the host dir of cgroup path p in mount m, or "" if p is not
// visible through m.
func underMount(m cgroupMount, p string) string {
	rel, err := filepath.Rel(m.root, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return ""
	}
	return filepath.Join(m.point, rel)
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
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return 0, false
	}
	s := strings.TrimSpace(string(data))
	if s == "max" {
		return ^uint64(0), true
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

func hasWord(list, word, sep string) bool {
	for _, w := range strings.Split(list, sep) {
		if w == word {
			return true
		}
	}
	return false
}

func indexOf(f []string, s string) int {
	for i, v := range f {
		if v == s {
			return i
		}
	}
	return -1
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
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
	var pids []int
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids, err == nil
}
