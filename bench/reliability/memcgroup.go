package reliability

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/evjournal/containerd/bench/internal/harness"
)

// memCgroup is a memory cgroup of the run that a daemon is moved into, so
// that what it may hold is the limit's, and the kernel says whether it had
// to kill in it (cgroup v1 or v2).
type memCgroup struct {
	dir string
	v2  bool
}

// newMemCgroup makes the cgroup, limited to limit bytes. Its name does not
// carry the run's container prefix (the harness kills what runs in such
// cgroups as leftovers): it is removed at the env's close, whatever still
// runs in it moved back to the root first.
func newMemCgroup(env *harness.Env, name string, limit int64) (*memCgroup, error) {
	c := &memCgroup{dir: filepath.Join("/sys/fs/cgroup/memory", env.Tag+"_"+name)}
	limitFile := "memory.limit_in_bytes"
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		c.dir, c.v2, limitFile = filepath.Join("/sys/fs/cgroup", env.Tag+"_"+name), true, "memory.max"
	}
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("memory cgroup: %w", err)
	}
	env.Defer(c.remove)
	if err := os.WriteFile(filepath.Join(c.dir, limitFile), []byte(strconv.FormatInt(limit, 10)), 0); err != nil {
		return nil, fmt.Errorf("memory cgroup %s: %w", limitFile, err)
	}
	return c, nil
}

// add moves pid (and the children it starts from then on) into the cgroup.
func (c *memCgroup) add(pid int) error {
	return os.WriteFile(filepath.Join(c.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
}

// oomKills is how many processes the kernel killed in the cgroup for
// want of memory.
func (c *memCgroup) oomKills() (int, error) {
	file := "memory.oom_control"
	if c.v2 {
		file = "memory.events"
	}
	f, err := os.Open(filepath.Join(c.dir, file))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "oom_kill "); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("no oom_kill count in " + file + " (kernel before 4.13)")
}

// peak is the most memory the cgroup used, in bytes.
func (c *memCgroup) peak() (int64, error) {
	file := "memory.max_usage_in_bytes"
	if c.v2 {
		file = "memory.peak"
	}
	b, err := os.ReadFile(filepath.Join(c.dir, file))
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// remove moves what still runs in the cgroup to the root and removes it.
func (c *memCgroup) remove() {
	root := filepath.Dir(c.dir)
	if b, err := os.ReadFile(filepath.Join(c.dir, "cgroup.procs")); err == nil {
		for _, pid := range strings.Fields(string(b)) {
			os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(pid), 0)
		}
	}
	os.Remove(c.dir)
}
