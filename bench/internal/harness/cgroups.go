package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// killTagged is the cleanup of last resort: it kills every process in a
// cgroup named after one of this run's container ids (a container whose
// runc state was lost can be found no other way) and removes those
// cgroups. It returns what it had to kill.
func (e *Env) killTagged() []string {
	mark := "/" + e.Tag + "-"
	var out []string
	for _, p := range Procs(func(p Proc) bool { return inCgroup(p.Pid, mark) }) {
		syscall.Kill(p.Pid, syscall.SIGKILL)
		out = append(out, fmt.Sprintf("pid %d in a cgroup of this run: %s", p.Pid, strings.Join(p.Args, " ")))
	}
	if len(out) > 0 {
		time.Sleep(200 * time.Millisecond)
	}
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + e.Tag + "-*")
	more, _ := filepath.Glob("/sys/fs/cgroup/" + e.Tag + "-*")
	for _, d := range append(dirs, more...) {
		os.Remove(d) // rmdir: only empty cgroups go, which is all we want
	}
	return out
}

func inCgroup(pid int, mark string) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	return err == nil && strings.Contains(string(data), mark)
}

// removeCgroupTree removes the cgroup dir and every cgroup below it,
// children first; a cgroup still holding a process stays (rmdir fails).
func removeCgroupTree(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() {
			removeCgroupTree(filepath.Join(dir, e.Name()))
		}
	}
	os.Remove(dir)
}
