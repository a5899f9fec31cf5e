package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"
	"github.com/opencontainers/cgroups"
)

const mountinfoHybrid = `22 1 0:21 / /sys rw,nosuid - sysfs sysfs rw
30 22 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755
35 30 0:31 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory
36 30 0:32 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
37 30 0:33 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`

func TestResolveCgroup(t *testing.T) {
	for _, tc := range []struct {
		name, cgroup, mountinfo string
		v1, v2                  string
	}{
		{"hybrid", "9:name=systemd:/\n4:memory:/a/b\n3:cpu,cpuacct:/a/b\n0::/a/b\n", mountinfoHybrid,
			"/sys/fs/cgroup/memory/a/b", "/sys/fs/cgroup/unified/a/b"},
		{"v2 only", "0::/x\n", "40 1 0:40 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", "", "/sys/fs/cgroup/x"},
		{"mounted at a sub-root", "4:memory:/outer/c1\n", "35 30 0:31 /outer /mnt/mem rw - cgroup cgroup rw,memory\n",
			"/mnt/mem/c1", ""},
		{"not visible through the mount", "4:memory:/elsewhere\n", "35 30 0:31 /outer /mnt/mem rw - cgroup cgroup rw,memory\n",
			"", ""},
		{"escaped mount point", "4:memory:/c\n", `35 30 0:31 / /mnt/with\040space rw - cgroup cgroup rw,memory` + "\n",
			"/mnt/with space/c", ""},
		{"no memory controller", "3:cpu:/c\n", mountinfoHybrid, "", ""},
		{"memory beside other controllers", "5:cpu,memory:/m\n", "35 30 0:31 / /cg rw - cgroup cgroup rw,cpu,memory\n", "/cg/m", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			procCgroup := filepath.Join(t.TempDir(), "cgroup")
			must(t, os.WriteFile(procCgroup, []byte(tc.cgroup), 0o600))
			paths, err := cgroups.ParseCgroupFile(procCgroup)
			must(t, err)
			mounts, err := mountinfo.GetMountsFromReader(strings.NewReader(tc.mountinfo), mountinfo.FSTypeFilter("cgroup", "cgroup2"))
			must(t, err)
			v1, v2 := resolveCgroup(paths, mounts, "memory")
			if v1 != tc.v1 || v2 != tc.v2 {
				t.Fatalf("got (%q, %q), want (%q, %q)", v1, v2, tc.v1, tc.v2)
			}
		})
	}
}

func TestReadHugetlbLimits(t *testing.T) {
	// Let the cgroups library read files outside a cgroupfs.
	cgroups.TestMode = true
	t.Cleanup(func() { cgroups.TestMode = false })
	v1, v2 := t.TempDir(), t.TempDir()
	must(t, os.WriteFile(filepath.Join(v1, "hugetlb.2MB.limit_in_bytes"), []byte("4194304\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(v2, "hugetlb.1GB.max"), []byte("max\n"), 0o600))
	got := readHugetlbLimits(v1, v2, []string{"2MB", "1GB", "64KB"})
	if len(got) != 2 || got["2MB"] != 4<<20 || got["1GB"] != ^uint64(0) {
		t.Fatalf("limits = %v", got)
	}
	if got := readHugetlbLimits("", "", []string{"2MB"}); got != nil {
		t.Fatalf("limits without a cgroup = %v, want nil", got)
	}
}
