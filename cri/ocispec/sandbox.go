package ocispec

import (
	"errors"
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// SandboxOOMScoreAdj is the pause process's oom_score_adj: kubelet gives
// its own critical pods -998, and the sandbox must outlive its containers.
// A daemon without CAP_SYS_RESOURCE gives its own score instead (see
// restrictOOMScoreAdj).
const SandboxOOMScoreAdj = -998

// defaultPath is the PATH of a process whose image sets none.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// SandboxParams are what the runtime, not the config, decides for a
// sandbox.
type SandboxParams struct {
	ID         string
	PauseArgs  []string // argv of the pause process in its rootfs
	RootfsPath string   // mounted read-only

	// NetNSPath is the pod's pinned network namespace (made by the CNI
	// step). It must be empty when the pod's network is NODE (host
	// network) or the pod has a user namespace (the pause makes it), and
	// set otherwise.
	NetNSPath string
	// CgroupParent replaces the config's cgroup_parent when set.
	CgroupParent string
	// Files of the pod bound read-only at /etc/resolv.conf, /etc/hostname
	// and /etc/hosts of the pause container, when set.
	ResolvConfPath, HostnamePath, HostsPath string
	// ShmPath is the pod's /dev/shm on the host (a tmpfs the runtime
	// mounted, shared with the containers); empty gives the sandbox a
	// tmpfs of ShmSize bytes (DefaultShmSize when 0). Ignored with host
	// IPC, where the host's /dev/shm is bound.
	ShmPath string
	ShmSize int64
}

// Sandbox returns the spec of a pod's pause process: its own mount, pid,
// ipc and uts namespaces unless the namespace options say NODE, the pinned
// network namespace (or the host's), a read-only rootfs, the minimal
// mounts, no capabilities, oom_score_adj -998, the pod's validated sysctls
// and the seccomp profile of the sandbox's security context.
func Sandbox(cfg *runtime.PodSandboxConfig, p SandboxParams) (*specs.Spec, error) {
	if p.ID == "" || len(p.PauseArgs) == 0 || p.RootfsPath == "" {
		return nil, errors.New("ocispec: sandbox params need ID, PauseArgs and RootfsPath")
	}
	sc := cfg.GetLinux().GetSecurityContext()
	ns := sc.GetNamespaceOptions()
	hostNet, hostIPC := ns.GetNetwork() == runtime.NamespaceMode_NODE, ns.GetIpc() == runtime.NamespaceMode_NODE
	userNS, err := PodUserNS(cfg)
	if err != nil {
		return nil, err
	}
	namespaces, err := sandboxNamespaces(ns, p.NetNSPath, userNS != nil)
	if err != nil {
		return nil, err
	}
	if err := checkSELinux(sandboxScope, sc.GetSelinuxOptions()); err != nil {
		return nil, err
	}
	user, err := containerUser(sandboxScope, p.RootfsPath, sandboxUserRequest(sc))
	if err != nil {
		return nil, err
	}
	parent := p.CgroupParent
	if parent == "" {
		parent = cfg.GetLinux().GetCgroupParent()
	}
	cgPath, err := cgroupsPath(sandboxScope, parent, p.ID)
	if err != nil {
		return nil, err
	}
	sysctl, err := sysctls(sandboxScope, cfg.GetLinux().GetSysctls(), hostNet, hostIPC)
	if err != nil {
		return nil, err
	}
	//lint:ignore SA1019 the deprecated path is read when the typed field is unset, as the CRI asks
	seccomp, err := seccompFor(sandboxScope, sc.GetSeccomp(), sc.GetSeccompProfilePath(), nil)
	if err != nil {
		return nil, err
	}
	apparmor, err := appArmorProfile(sandboxScope, sc.GetApparmor(), "")
	if err != nil {
		return nil, err
	}
	oom := restrictOOMScoreAdj(SandboxOOMScoreAdj)
	s := &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			Args:            p.PauseArgs,
			Env:             []string{defaultPath},
			Cwd:             "/",
			User:            user,
			Capabilities:    &specs.LinuxCapabilities{},
			NoNewPrivileges: true,
			OOMScoreAdj:     &oom,
			ApparmorProfile: apparmor,
		},
		Root:        &specs.Root{Path: p.RootfsPath, Readonly: true},
		Mounts:      sandboxMounts(p, hostIPC, hostNet && userNS != nil),
		Annotations: sandboxAnnotations(cfg, p.ID),
		Linux: &specs.Linux{
			Namespaces:    namespaces,
			CgroupsPath:   cgPath,
			Sysctl:        sysctl,
			Seccomp:       seccomp,
			Resources:     &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}}},
			MaskedPaths:   slices.Clone(defaultMaskedPaths),
			ReadonlyPaths: slices.Clone(defaultReadonlyPaths),
		},
	}
	userNS.apply(s.Linux, "")
	if !hostNet {
		s.Hostname = cfg.GetHostname()
	}
	return s, nil
}

// sandboxNamespaces: mount always new; pid and ipc new unless NODE; uts
// new unless the network is the host's (the pod then has the host's name);
// network the pinned path, or the host's with NODE. The user namespace is
// added by UserNS.apply.
//
// With a user namespace the pause process makes the pod's network
// namespace itself (no path): it must belong to the user namespace, or
// sysfs cannot be mounted nor net sysctls set from inside; the runtime pins
// it once the pause runs (podnet.PinNetNS).
func sandboxNamespaces(ns *runtime.NamespaceOption, netnsPath string, ownUserNS bool) ([]specs.LinuxNamespace, error) {
	out := []specs.LinuxNamespace{{Type: specs.MountNamespace}}
	if ns.GetPid() != runtime.NamespaceMode_NODE {
		out = append(out, specs.LinuxNamespace{Type: specs.PIDNamespace})
	}
	if ns.GetIpc() != runtime.NamespaceMode_NODE {
		out = append(out, specs.LinuxNamespace{Type: specs.IPCNamespace})
	}
	switch {
	case ns.GetNetwork() == runtime.NamespaceMode_NODE:
		if netnsPath != "" {
			return nil, fieldErrorf(sandboxScope, "namespace_options.network", "host network, but a network namespace %s was given", netnsPath)
		}
	case ownUserNS && netnsPath != "":
		return nil, fieldErrorf(sandboxScope, "namespace_options.network", "with a user namespace the pause process makes the pod's network namespace, but %s was given", netnsPath)
	case ownUserNS:
		out = append(out, specs.LinuxNamespace{Type: specs.NetworkNamespace}, specs.LinuxNamespace{Type: specs.UTSNamespace})
	case netnsPath == "":
		return nil, fieldErrorf(sandboxScope, "namespace_options.network", "pod network needs a pinned network namespace (SandboxParams.NetNSPath)")
	default:
		out = append(out,
			specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: netnsPath},
			specs.LinuxNamespace{Type: specs.UTSNamespace})
	}
	return out, nil
}

func sandboxMounts(p SandboxParams, hostIPC, hostSys bool) []specs.Mount {
	ms := baseMounts(false)
	if hostSys {
		ms = hostSysfs(ms)
	}
	shm := p.ShmPath
	if hostIPC {
		shm = "/dev/shm"
	}
	ms = append(ms, shmMount(shm, p.ShmSize))
	for _, f := range []struct{ dst, src string }{
		{"/etc/resolv.conf", p.ResolvConfPath}, {"/etc/hostname", p.HostnamePath}, {"/etc/hosts", p.HostsPath},
	} {
		if f.src != "" {
			ms = append(ms, bindMount(f.dst, f.src, true))
		}
	}
	return ms
}

func sandboxUserRequest(sc *runtime.LinuxSandboxSecurityContext) userRequest {
	r := userRequest{
		supplemental: sc.GetSupplementalGroups(),
		strict:       sc.GetSupplementalGroupsPolicy() == runtime.SupplementalGroupsPolicy_Strict,
	}
	if v := sc.GetRunAsUser(); v != nil {
		r.uid = &v.Value
	}
	if v := sc.GetRunAsGroup(); v != nil {
		r.gid = &v.Value
	}
	return r
}

func sandboxAnnotations(cfg *runtime.PodSandboxConfig, id string) map[string]string {
	md := cfg.GetMetadata()
	return map[string]string{
		AnnotationContainerType: ContainerTypeSandbox,
		AnnotationSandboxID:     id,
		AnnotationSandboxName:   md.GetName(),
		AnnotationSandboxNS:     md.GetNamespace(),
		AnnotationSandboxUID:    md.GetUid(),
		AnnotationSandboxLogDir: cfg.GetLogDirectory(),
	}
}
