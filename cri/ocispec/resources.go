package ocispec

import (
	"fmt"
	"maps"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// cgroupsPath puts id under the config's parent, cgroupfs style:
// "/kubepods/burstable/pod<uid>" gives "/kubepods/burstable/pod<uid>/<id>".
// A systemd-style parent ("kubepods-burstable.slice") is refused: the
// daemon drives runc with the cgroupfs driver, so kubelet must run with
// --cgroup-driver=cgroupfs; mixing the two would put containers outside
// the slices kubelet accounts for.
func cgroupsPath(scope, parent, id string) (string, error) {
	if strings.HasSuffix(parent, ".slice") {
		return "", fieldErrorf(scope, "cgroup_parent",
			"%q is a systemd slice; this runtime uses the cgroupfs driver (run kubelet with --cgroup-driver=cgroupfs)", parent)
	}
	if slices.Contains(strings.Split(parent, "/"), "..") {
		return "", fieldErrorf(scope, "cgroup_parent", "%q has a \"..\" element", parent)
	}
	return path.Join("/", parent, id), nil
}

var hugepageSize = regexp.MustCompile(`^[1-9][0-9]*[KMG]B$`)

// linuxResources maps the CRI's resources; a zero field means "not set"
// and sets nothing. oom_score_adj goes to the process, not here.
func linuxResources(r *runtime.LinuxContainerResources) (*specs.LinuxResources, error) {
	out := &specs.LinuxResources{}
	if r == nil {
		return out, nil
	}
	cpu := &specs.LinuxCPU{Cpus: r.GetCpusetCpus(), Mems: r.GetCpusetMems()}
	if v := r.GetCpuPeriod(); v != 0 {
		if v < 0 {
			return nil, fieldErrorf(containerScope, "resources.cpu_period", "%d is negative", v)
		}
		p := uint64(v)
		cpu.Period = &p
	}
	if v := r.GetCpuQuota(); v != 0 {
		cpu.Quota = &v
	}
	if v := r.GetCpuShares(); v != 0 {
		if v < 0 {
			return nil, fieldErrorf(containerScope, "resources.cpu_shares", "%d is negative", v)
		}
		s := uint64(v)
		cpu.Shares = &s
	}
	if *cpu != (specs.LinuxCPU{}) {
		out.CPU = cpu
	}
	if err := memoryResources(r, out); err != nil {
		return nil, err
	}
	for i, h := range r.GetHugepageLimits() {
		if !hugepageSize.MatchString(h.GetPageSize()) {
			return nil, fieldErrorf(containerScope, fmt.Sprintf("resources.hugepage_limits[%d]", i),
				"page size %q is not like 2MB or 1GB", h.GetPageSize())
		}
		if !hugetlbAvailable() {
			continue // checked, then dropped: see hugetlbController
		}
		out.HugepageLimits = append(out.HugepageLimits, specs.LinuxHugepageLimit{Pagesize: h.GetPageSize(), Limit: h.GetLimit()})
	}
	if u := r.GetUnified(); len(u) > 0 {
		out.Unified = maps.Clone(u)
	}
	return out, nil
}

func memoryResources(r *runtime.LinuxContainerResources, out *specs.LinuxResources) error {
	limit, swap := r.GetMemoryLimitInBytes(), r.GetMemorySwapLimitInBytes()
	if limit < 0 {
		return fieldErrorf(containerScope, "resources.memory_limit_in_bytes", "%d is negative", limit)
	}
	if swap != 0 && swap != -1 && swap < limit {
		return fieldErrorf(containerScope, "resources.memory_swap_limit_in_bytes",
			"%d is below the memory limit %d (it counts memory plus swap)", swap, limit)
	}
	if limit == 0 && swap == 0 {
		return nil
	}
	out.Memory = &specs.LinuxMemory{}
	if limit != 0 {
		out.Memory.Limit = &limit
	}
	if swap != 0 {
		out.Memory.Swap = &swap
	}
	return nil
}

// oomScoreAdj checks the range the kernel takes, and raises the value to
// what this process may set (restrictOOMScoreAdj).
func oomScoreAdj(v int64) (*int, error) {
	if v < -1000 || v > 1000 {
		return nil, fieldErrorf(containerScope, "resources.oom_score_adj", "%d is outside [-1000, 1000]", v)
	}
	n := restrictOOMScoreAdj(int(v))
	return &n, nil
}

// sysctlNS says which namespace a sysctl belongs to, "" if none: only
// namespaced sysctls may be set, since the others would change the host.
func sysctlNS(name string) string {
	switch {
	case strings.HasPrefix(name, "net."):
		return "net"
	case strings.HasPrefix(name, "kernel.shm"), strings.HasPrefix(name, "kernel.msg"),
		name == "kernel.sem", strings.HasPrefix(name, "fs.mqueue."):
		return "ipc"
	}
	return ""
}

// sysctls validates the sandbox's sysctls: names with '/' are taken as
// dotted ones (as kubelet allows), only namespaced sysctls are accepted,
// and none of a namespace the pod shares with the host.
func sysctls(scope string, in map[string]string, hostNet, hostIPC bool) (map[string]string, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(in))
	for _, name := range slices.Sorted(maps.Keys(in)) {
		n := strings.ReplaceAll(name, "/", ".")
		field := fmt.Sprintf("sysctls[%s]", name)
		switch sysctlNS(n) {
		case "":
			return nil, fieldErrorf(scope, field, "not a namespaced sysctl: it would change the host")
		case "net":
			if hostNet {
				return nil, fieldErrorf(scope, field, "a net.* sysctl needs the pod's own network namespace, not the host's")
			}
		case "ipc":
			if hostIPC {
				return nil, fieldErrorf(scope, field, "an IPC sysctl needs the pod's own IPC namespace, not the host's")
			}
		}
		out[n] = in[name]
	}
	return out, nil
}

// hugetlbController says whether runc can set hugetlb limits here: a cgroup
// v1 hugetlb hierarchy is mounted, or the unified hierarchy at
// /sys/fs/cgroup offers the controller. kubelet sends a limit (0) for every
// page size the kernel has, with every container; where runc cannot apply
// them (a hybrid host whose hugetlb controller sits on the v2 side) the
// limits are dropped rather than every container failing to start, as
// containerd's tolerate_missing_hugetlb_controller does.
var hugetlbAvailable = hugetlbController // tests replace it

func hugetlbController() bool {
	if fi, err := os.Stat("/sys/fs/cgroup/hugetlb"); err == nil && fi.IsDir() {
		return true
	}
	data, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers")
	return err == nil && slices.Contains(strings.Fields(string(data)), "hugetlb")
}
