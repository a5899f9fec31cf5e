package harness

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// StatusField reads a "Name: value kB" or "Name: value" line of
// /proc/PID/status and returns the number.
func StatusField(pid int, name string) (int64, error) {
	return keyedNumber(fmt.Sprintf("/proc/%d/status", pid), name)
}

// SmapsRollup returns the Rss and Pss of a process in KiB.
func SmapsRollup(pid int) (rss, pss int64, err error) {
	path := fmt.Sprintf("/proc/%d/smaps_rollup", pid)
	if rss, err = keyedNumber(path, "Rss"); err != nil {
		return 0, 0, err
	}
	pss, err = keyedNumber(path, "Pss")
	return rss, pss, err
}

func keyedNumber(path, key string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != key {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			break
		}
		return strconv.ParseInt(fields[0], 10, 64)
	}
	return 0, fmt.Errorf("%s: no %s", path, key)
}

// FDCount is the number of open fds of a process.
func FDCount(pid int) (int, error) {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(entries), err
}

// Proc is a process found in /proc.
type Proc struct {
	Pid   int
	PPid  int
	State string
	Args  []string
	Exe   string
	Cwd   string
}

// ReadProc reads one process; ok is false when it is gone.
func ReadProc(pid int) (Proc, bool) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return Proc{}, false
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return Proc{}, false
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 2 {
		return Proc{}, false
	}
	p := Proc{Pid: pid, State: fields[0]}
	p.PPid, _ = strconv.Atoi(fields[1])
	cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
	if c := strings.TrimRight(string(cmdline), "\x00"); c != "" {
		p.Args = strings.Split(c, "\x00")
	}
	p.Exe, _ = os.Readlink(filepath.Join(dir, "exe"))
	p.Cwd, _ = os.Readlink(filepath.Join(dir, "cwd"))
	return p, true
}

// Procs lists every process for which keep returns true.
func Procs(keep func(Proc) bool) []Proc {
	entries, _ := os.ReadDir("/proc")
	var out []Proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := ReadProc(pid); ok && keep(p) {
			out = append(out, p)
		}
	}
	return out
}

// Shims lists the live shim processes (bin/containerd-shim) whose working
// directory lies under dir (a state dir): ShimContainer names their
// container. Idle spare shims (working directory "/") are not among them.
func (e *Env) Shims(dir string) []Proc { return ShimsOf(e.Bins.Shim, dir) }

// ShimsOf is Shims for the shim binary at path.
func ShimsOf(path, dir string) []Proc {
	return Procs(func(p Proc) bool {
		return p.State != "Z" && strings.HasPrefix(p.Exe, path) && strings.HasPrefix(p.Cwd, dir)
	})
}

// Spares lists the idle spare shims of the daemon daemonPid: children of
// the daemon running the shim binary from "/", where a spare waits until
// an assignment gives it a process dir (docs/shim-contract.md, "Spares").
// A spare costs the node memory like any shim, so the figures count it.
func (e *Env) Spares(daemonPid int) []Proc { return SparesOf(e.Bins.Shim, daemonPid) }

// SparesOf is Spares for the shim binary at path.
func SparesOf(path string, daemonPid int) []Proc {
	return Procs(func(p Proc) bool {
		return p.State != "Z" && p.PPid == daemonPid && strings.HasPrefix(p.Exe, path) && p.Cwd == "/"
	})
}

// ShimContainer is the id of the container whose process the shim p holds,
// from its working directory: <stateDir>/<id>/<process>, or
// <stateDir>/.retired/<id>.<incarnation>/<process> once the init exited.
// Not from its command line: a shim started as a spare keeps
// `containerd-shim --spare` (docs/shim-contract.md, "Spares").
func ShimContainer(stateDir string, p Proc) string {
	rel, err := filepath.Rel(stateDir, p.Cwd)
	if err != nil {
		return ""
	}
	parts := strings.Split(rel, string(filepath.Separator))
	if len(parts) >= 2 && parts[0] == ".retired" {
		if i := strings.LastIndexByte(parts[1], '.'); i > 0 {
			return parts[1][:i]
		}
		return parts[1]
	}
	if len(parts) == 0 || parts[0] == ".." {
		return ""
	}
	return parts[0]
}

// ZombieChildren lists the zombie children of parent.
func ZombieChildren(parent int) []int {
	var out []int
	for _, p := range Procs(func(p Proc) bool { return p.PPid == parent && p.State == "Z" }) {
		out = append(out, p.Pid)
	}
	return out
}

// Alive reports whether pid exists and is not a zombie.
func Alive(pid int) bool {
	p, ok := ReadProc(pid)
	return ok && p.State != "Z" && p.State != "X"
}
