package ocispec

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// DefaultShmSize is the size of a pod's /dev/shm when nothing else is said:
// 64 MiB, Docker's and containerd's default.
const DefaultShmSize = 64 << 20

// Kubernetes' default lists of paths a container must not see (masked) or
// write (read-only) in /proc and /sys, as kubelet's DefaultProcMount gives
// them. The config's own lists replace them; a privileged container has
// none.
var (
	defaultMaskedPaths = []string{
		"/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kcore", "/proc/keys",
		"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
		"/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap",
	}
	defaultReadonlyPaths = []string{
		"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
	}
)

// baseMounts are the kernel filesystems every container and sandbox gets.
// shm is added by the caller (a tmpfs, or the sandbox's bind mount).
func baseMounts(privileged bool) []specs.Mount {
	sysOpt := "ro"
	if privileged {
		sysOpt = "rw"
	}
	return []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", sysOpt}},
	}
}

// hostSysfs makes /sys a recursive read-only bind of the host's /sys, for
// a pod with a user namespace of its own on the host's network: a sysfs
// can be mounted only from a user namespace that owns the network
// namespace it shows (the host's belongs to the initial one), so the
// runtime's sysfs mount would fail with EPERM and the pod never start.
// containerd binds the host's /sys so too.
func hostSysfs(ms []specs.Mount) []specs.Mount {
	for i, m := range ms {
		if path.Clean(m.Destination) == "/sys" {
			ms[i] = specs.Mount{Destination: "/sys", Type: "bind", Source: "/sys", Options: []string{"rbind", "rro", "nosuid", "nodev", "noexec"}}
		}
	}
	return ms
}

// shmMount is /dev/shm: a bind of hostPath when given (the pod's shared
// tmpfs, or the host's /dev/shm for host IPC), else a private tmpfs.
func shmMount(hostPath string, size int64) specs.Mount {
	if hostPath != "" {
		return bindMount("/dev/shm", hostPath, false)
	}
	if size <= 0 {
		size = DefaultShmSize
	}
	return specs.Mount{Destination: "/dev/shm", Type: "tmpfs", Source: "shm",
		Options: []string{"nosuid", "noexec", "nodev", "mode=1777", fmt.Sprintf("size=%d", size)}}
}

func bindMount(dst, src string, readonly bool) specs.Mount {
	rw := "rw"
	if readonly {
		rw = "ro"
	}
	return specs.Mount{Destination: dst, Type: "bind", Source: src, Options: []string{"rbind", "rprivate", rw}}
}

// criMounts maps the container config's mounts. A missing host path is
// created as a directory, as containerd (and Docker before it) does: the
// CRI comment asks for an error, but kubelet relies on the runtime for
// hostPath volumes of type "" (no check), which users expect to be made.
// It returns the mounts and the rootfs propagation they need.
func criMounts(ms []*runtime.Mount) ([]specs.Mount, string, error) {
	var out []specs.Mount
	rootProp := ""
	for i, m := range ms {
		om, prop, err := criMount(m)
		if err != nil {
			return nil, "", fieldError(containerScope, fmt.Sprintf("mount[%d]", i), err)
		}
		out = append(out, om)
		rootProp = strongerPropagation(rootProp, prop)
	}
	// Parents before children, whatever order the config gave.
	slices.SortStableFunc(out, func(a, b specs.Mount) int {
		return depth(a.Destination) - depth(b.Destination)
	})
	return out, rootProp, nil
}

func depth(p string) int {
	return strings.Count(path.Clean(p), "/")
}

func criMount(m *runtime.Mount) (specs.Mount, string, error) {
	var none specs.Mount
	dst := m.GetContainerPath()
	switch {
	case m.GetImage() != nil && m.GetImage().GetImage() != "":
		return none, "", errors.New("image volumes are not supported by this runtime")
	case !path.IsAbs(dst):
		return none, "", fmt.Errorf("container path %q is not absolute", dst)
	case m.GetHostPath() == "":
		return none, "", errors.New("host path is empty")
	}
	src, err := hostSource(m.GetHostPath())
	if err != nil {
		return none, "", fmt.Errorf("host path %s: %w", m.GetHostPath(), err)
	}
	opts := []string{"rbind"}
	prop, rootProp, err := propagation(m)
	if err != nil {
		return none, "", err
	}
	opts = append(opts, prop)
	// The client's options (the CRI's mount_options: noexec, nodev,
	// nosuid; the service refuses others) go before the daemon's ro/rw,
	// so that the daemon's read-only is never undone by a later "rw".
	opts = append(opts, m.GetMountOptions()...)
	switch {
	case m.GetRecursiveReadOnly():
		if !m.GetReadonly() || m.GetPropagation() != runtime.MountPropagation_PROPAGATION_PRIVATE {
			return none, "", errors.New("recursive_read_only needs readonly and private propagation")
		}
		opts = append(opts, "rro")
	case m.GetReadonly():
		opts = append(opts, "ro")
	default:
		opts = append(opts, "rw")
	}
	// selinux_relabel is ignored: this kernel has no SELinux, and a label
	// on a host path would change the host's files for nothing.
	uids, gids, err := mountIDMappings(m)
	if err != nil {
		return none, "", err
	}
	return specs.Mount{Destination: path.Clean(dst), Type: "bind", Source: src, Options: opts,
		UIDMappings: uids, GIDMappings: gids}, rootProp, nil
}

// mountIDMappings: kubelet gives every mount of a pod with a user
// namespace the pod's mappings, so that the host's files keep their owners
// as seen from the pod (runc makes the bind mount id-mapped, Linux 5.12;
// the mount's file system must support it). Both or neither must be set.
func mountIDMappings(m *runtime.Mount) ([]specs.LinuxIDMapping, []specs.LinuxIDMapping, error) {
	conv := func(ms []*runtime.IDMapping) []specs.LinuxIDMapping {
		var out []specs.LinuxIDMapping
		for _, x := range ms {
			out = append(out, specs.LinuxIDMapping{ContainerID: x.GetContainerId(), HostID: x.GetHostId(), Size: x.GetLength()})
		}
		return out
	}
	uids, gids := conv(m.GetUidMappings()), conv(m.GetGidMappings())
	if (len(uids) == 0) != (len(gids) == 0) {
		return nil, nil, errors.New("an id-mapped mount needs both uid_mappings and gid_mappings")
	}
	for _, x := range append(slices.Clone(uids), gids...) {
		if x.Size == 0 || uint64(x.HostID)+uint64(x.Size) > 1<<32 || uint64(x.ContainerID)+uint64(x.Size) > 1<<32 {
			return nil, nil, fmt.Errorf("id mapping %d %d %d: length 0 or past 2^32", x.ContainerID, x.HostID, x.Size)
		}
	}
	return uids, gids, nil
}

// hostSource makes a missing host path a directory (see criMounts) and
// follows symlinks, as the CRI asks.
func hostSource(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", errors.New("not an absolute path")
	}
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return "", err
		}
	} else if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(p)
}

// propagation returns the mount's propagation option and what the
// container's rootfs propagation must then be: a slave or shared bind mount
// only receives (or sends) mounts if the rootfs mount is slave or shared
// too. Whether the host path is itself on a shared mount is not checked.
func propagation(m *runtime.Mount) (string, string, error) {
	switch m.GetPropagation() {
	case runtime.MountPropagation_PROPAGATION_PRIVATE:
		return "rprivate", "", nil
	case runtime.MountPropagation_PROPAGATION_HOST_TO_CONTAINER:
		return "rslave", "rslave", nil
	case runtime.MountPropagation_PROPAGATION_BIDIRECTIONAL:
		return "rshared", "rshared", nil
	}
	return "", "", fmt.Errorf("unknown propagation %d", m.GetPropagation())
}

// strongerPropagation: rshared needs more than rslave, which needs more
// than the default.
func strongerPropagation(a, b string) string {
	rank := map[string]int{"": 0, "rslave": 1, "rshared": 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

// mergeMounts puts the config's mounts over the defaults: a default whose
// destination a config mount takes is dropped, and so is every default
// under /dev when the config mounts /dev itself.
func mergeMounts(defaults, own []specs.Mount) []specs.Mount {
	taken := map[string]bool{}
	for _, m := range own {
		taken[path.Clean(m.Destination)] = true
	}
	var out []specs.Mount
	for _, m := range defaults {
		dst := path.Clean(m.Destination)
		if taken[dst] || (taken["/dev"] && strings.HasPrefix(dst, "/dev/")) {
			continue
		}
		out = append(out, m)
	}
	return append(out, own...)
}
