package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// oomBaselineFile holds, for an init the shim starts itself, the oom_kill
// counters of its memory cgroup read between `runc create` and `runc start`:
// one "<counter file> <value>" line per hierarchy found (cgroup v1
// memory.oom_control, cgroup v2 memory.events). The daemon arms its OOM
// watch only after the start and counts kills from these values, so a kill
// in the first milliseconds of the container is still reported.
const oomBaselineFile = "oom-baseline"

// recordOOMBaseline writes oomBaselineFile for the created init pid. Not
// durable on purpose: the daemon reads it once, right after our start
// report, and reads the counter itself when the file is missing.
func recordOOMBaseline(pid int) error {
	var out []byte
	for _, f := range memoryCounterFiles(pid) {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if n, ok := oomKillCount(data); ok {
			out = append(append(append(out, f...), ' '), strconv.FormatUint(n, 10)...)
			out = append(out, '\n')
		}
	}
	return os.WriteFile(oomBaselineFile, out, 0o600)
}

// memoryCounterFiles are the host paths of pid's OOM counter files: found
// from /proc/<pid>/cgroup and the cgroup mounts of our own mountinfo, the
// way the daemon finds the dirs it watches (runtime/cgroups.go).
func memoryCounterFiles(pid int) []string {
	cg, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return nil
	}
	v1Path, v2Path, inV1, inV2 := memoryCgroupPaths(cg)
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var files []string
	for line := range strings.Lines(string(mounts)) {
		root, mountpoint, fstype, super, ok := parseMountinfoLine(strings.TrimSuffix(line, "\n"))
		switch {
		case !ok:
		case fstype == "cgroup" && inV1 && hasOption(super, "memory"):
			if dir := underRoot(root, mountpoint, v1Path); dir != "" {
				files = append(files, filepath.Join(dir, "memory.oom_control"))
				inV1 = false
			}
		case fstype == "cgroup2" && inV2:
			if dir := underRoot(root, mountpoint, v2Path); dir != "" {
				files = append(files, filepath.Join(dir, "memory.events"))
				inV2 = false
			}
		}
	}
	return files
}

// memoryCgroupPaths reads a /proc/<pid>/cgroup: the path in the v1 hierarchy
// that has the memory controller, and the path in the v2 one ("0::").
func memoryCgroupPaths(data []byte) (v1, v2 string, inV1, inV2 bool) {
	for line := range strings.Lines(string(data)) {
		id, rest, ok1 := strings.Cut(strings.TrimSuffix(line, "\n"), ":")
		ctrls, path, ok2 := strings.Cut(rest, ":")
		switch {
		case !ok1 || !ok2:
		case id == "0" && ctrls == "":
			v2, inV2 = path, true
		case hasOption(ctrls, "memory"):
			v1, inV1 = path, true
		}
	}
	return v1, v2, inV1, inV2
}

// parseMountinfoLine returns the fields of one /proc/self/mountinfo line we
// need: "id parent maj:min root mountpoint options [optional...] - fstype
// source superoptions". Octal escapes (\040) in paths are decoded.
func parseMountinfoLine(line string) (root, mountpoint, fstype, super string, ok bool) {
	pre, post, found := strings.Cut(line, " - ")
	if !found {
		return "", "", "", "", false
	}
	f, g := strings.Fields(pre), strings.Fields(post)
	if len(f) < 5 || len(g) < 3 {
		return "", "", "", "", false
	}
	return unescapeMount(f[3]), unescapeMount(f[4]), g[0], g[2], true
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
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

func hasOption(list, name string) bool {
	for o := range strings.SplitSeq(list, ",") {
		if o == name {
			return true
		}
	}
	return false
}

// underRoot is the host dir of cgroup path p in a mount of root at
// mountpoint, or "" when p is outside what the mount shows.
func underRoot(root, mountpoint, p string) string {
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return ""
	}
	return filepath.Join(mountpoint, rel)
}

// oomKillCount finds the "oom_kill N" line of a counter file.
func oomKillCount(data []byte) (uint64, bool) {
	for line := range strings.Lines(string(data)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if ok && k == "oom_kill" {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
