package ocispec

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// allCaps are the capabilities by number (index = the kernel's number).
var allCaps = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
	"CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
	"CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK",
	"CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE",
	"CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE",
	"CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE",
	"CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG",
	"CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
	"CAP_CHECKPOINT_RESTORE",
}

// DefaultCaps is the set a container gets when its config adds or drops
// nothing: the 14 capabilities Docker, containerd and CRI-O all give.
var DefaultCaps = []string{
	"CAP_AUDIT_WRITE", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID",
	"CAP_KILL", "CAP_MKNOD", "CAP_NET_BIND_SERVICE", "CAP_NET_RAW", "CAP_SETFCAP",
	"CAP_SETGID", "CAP_SETPCAP", "CAP_SETUID", "CAP_SYS_CHROOT",
}

// kernelCaps are what "ALL" and privileged mean: the capabilities this
// kernel knows (allCaps up to /proc/sys/kernel/cap_last_cap) that this
// process may hand on, its bounding set. A daemon run without some
// capability (a container host that dropped CAP_SYS_RESOURCE, say) cannot
// give it to a container: runc would fail the start.
func kernelCaps() []string {
	caps := slices.Clone(allCaps)
	if data, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if last, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && last < len(allCaps) {
			caps = caps[:last+1]
		}
	}
	bnd, ok := boundingSet()
	if !ok {
		return caps
	}
	return slices.DeleteFunc(caps, func(c string) bool {
		i := slices.Index(allCaps, c)
		return i < 64 && bnd&(1<<i) == 0
	})
}

// boundingSet reads CapBnd of /proc/self/status.
func boundingSet() (uint64, bool) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// capName normalises a CRI capability name ("net_admin", "CAP_NET_ADMIN")
// to the OCI one, or says it is unknown.
func capName(name string) (string, error) {
	n := strings.ToUpper(name)
	if !strings.HasPrefix(n, "CAP_") {
		n = "CAP_" + n
	}
	if !slices.Contains(allCaps, n) {
		return "", fmt.Errorf("unknown capability %q", name)
	}
	return n, nil
}

// containerCaps applies the config's adds and drops to the defaults, the
// way Kubernetes means them: "ALL" in add starts from every capability,
// "ALL" in drop from none; then the named adds are added and the named
// drops removed (a capability both added and dropped is dropped).
// Ambient capabilities are added to every set, and are the only inheritable
// ones (an inheritable set would pass capabilities through exec of file
// capabilities, CVE-2022-24769).
func containerCaps(c *runtime.Capability) (*specs.LinuxCapabilities, error) {
	set := slices.Clone(DefaultCaps)
	if hasAll(c.GetAddCapabilities()) {
		set = kernelCaps()
	}
	if hasAll(c.GetDropCapabilities()) {
		set = nil
	}
	var err error
	for i, name := range c.GetAddCapabilities() {
		if set, err = editCaps(set, name, true); err != nil {
			return nil, fieldError(containerScope, fmt.Sprintf("capabilities.add[%d]", i), err)
		}
	}
	for i, name := range c.GetDropCapabilities() {
		if set, err = editCaps(set, name, false); err != nil {
			return nil, fieldError(containerScope, fmt.Sprintf("capabilities.drop[%d]", i), err)
		}
	}
	var ambient []string
	for i, name := range c.GetAddAmbientCapabilities() {
		n, err := capName(name)
		if err != nil {
			return nil, fieldError(containerScope, fmt.Sprintf("capabilities.add_ambient[%d]", i), err)
		}
		ambient = addCap(ambient, n)
		set = addCap(set, n)
	}
	return capSets(set, ambient), nil
}

func hasAll(names []string) bool {
	return slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(n, "ALL") })
}

func editCaps(set []string, name string, add bool) ([]string, error) {
	if strings.EqualFold(name, "ALL") {
		return set, nil
	}
	n, err := capName(name)
	if err != nil {
		return nil, err
	}
	if add {
		return addCap(set, n), nil
	}
	return slices.DeleteFunc(set, func(s string) bool { return s == n }), nil
}

func addCap(set []string, n string) []string {
	if slices.Contains(set, n) {
		return set
	}
	return append(set, n)
}

// capSets gives set as the bounding, permitted and effective sets, sorted
// for stable specs.
func capSets(set, ambient []string) *specs.LinuxCapabilities {
	slices.Sort(set)
	slices.Sort(ambient)
	return &specs.LinuxCapabilities{
		Bounding:    set,
		Permitted:   slices.Clone(set),
		Effective:   slices.Clone(set),
		Inheritable: ambient,
		Ambient:     slices.Clone(ambient),
	}
}
