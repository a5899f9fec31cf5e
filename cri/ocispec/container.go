package ocispec

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"

	imagespec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ImageConfig is an image's config (the "config" object of its config
// JSON); a container's spec takes its User, Env, Entrypoint, Cmd and
// WorkingDir.
type ImageConfig = imagespec.ImageConfig

// ContainerParams are what the runtime, not the config, decides for a
// container.
type ContainerParams struct {
	ID, SandboxID string
	RootfsPath    string
	ImageName     string // for the image-name annotation

	// CgroupParent replaces the sandbox config's cgroup_parent when set.
	CgroupParent string

	// The sandbox's namespaces to join. A path left empty is taken from
	// /proc/<SandboxPid>/ns/; the network one from the sandbox's pinned
	// netns is better than the pause process's (it outlives it).
	SandboxPid                                 int
	NetNSPath, IPCNSPath, UTSNSPath, PIDNSPath string
	// UserNSPath is the pod's user namespace when it has one (else
	// /proc/<SandboxPid>/ns/user).
	UserNSPath string
	// TargetPIDNSPath is the pid namespace of the target container for
	// pid mode TARGET (ephemeral debug containers).
	TargetPIDNSPath string

	// The pod's files, bound at /etc/hosts, /etc/resolv.conf and
	// /etc/hostname (read-only with a read-only rootfs), and its /dev/shm.
	HostsPath, ResolvConfPath, HostnamePath, ShmPath string
}

// Container returns the spec of a container of the pod cfg is the config
// of, from the container's config and its image's config. See
// docs/cri-spec.md for the field-by-field mapping.
func Container(cfg *runtime.ContainerConfig, sandbox *runtime.PodSandboxConfig, img ImageConfig, p ContainerParams) (*specs.Spec, error) {
	if p.ID == "" || p.SandboxID == "" || p.RootfsPath == "" {
		return nil, errors.New("ocispec: container params need ID, SandboxID and RootfsPath")
	}
	b := &containerBuilder{cfg: cfg, sandbox: sandbox, img: img, p: p,
		sc: cfg.GetLinux().GetSecurityContext()}
	steps := []func() error{
		b.checkPrivileged, b.process, b.namespaces, b.mounts, b.devices, b.resources, b.security,
	}
	b.spec = &specs.Spec{
		Version:     specs.Version,
		Root:        &specs.Root{Path: p.RootfsPath, Readonly: b.sc.GetReadonlyRootfs()},
		Linux:       &specs.Linux{},
		Annotations: b.annotations(),
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return b.spec, nil
}

// containerBuilder holds the inputs and the spec being built, so that each
// mapping is a small method.
type containerBuilder struct {
	cfg     *runtime.ContainerConfig
	sandbox *runtime.PodSandboxConfig
	img     ImageConfig
	p       ContainerParams
	sc      *runtime.LinuxContainerSecurityContext
	spec    *specs.Spec
}

func (b *containerBuilder) privileged() bool { return b.sc.GetPrivileged() }

// checkPrivileged: a privileged container needs a sandbox that said it
// would hold one (the CRI's rule).
func (b *containerBuilder) checkPrivileged() error {
	if b.privileged() && !b.sandbox.GetLinux().GetSecurityContext().GetPrivileged() {
		return fieldErrorf(containerScope, "privileged", "the sandbox is not privileged")
	}
	return nil
}

func (b *containerBuilder) process() error {
	args, err := commandLine(b.cfg.GetCommand(), b.cfg.GetArgs(), b.img.Entrypoint, b.img.Cmd)
	if err != nil {
		return err
	}
	user, err := containerUser(containerScope, b.p.RootfsPath, containerUserRequest(b.sc, b.img.User))
	if err != nil {
		return err
	}
	env, err := b.env()
	if err != nil {
		return err
	}
	cwd := b.cfg.GetWorkingDir()
	if cwd == "" {
		cwd = b.img.WorkingDir
	}
	if cwd == "" {
		cwd = "/"
	}
	oom, err := oomScoreAdj(b.cfg.GetLinux().GetResources().GetOomScoreAdj())
	if err != nil {
		return err
	}
	b.spec.Process = &specs.Process{
		Terminal: b.cfg.GetTty(), Args: args, Env: env, Cwd: cwd, User: user,
		NoNewPrivileges: b.sc.GetNoNewPrivs(), OOMScoreAdj: oom,
	}
	return nil
}

// commandLine merges the CRI command and args with the image's Entrypoint
// and Cmd as Kubernetes defines it: a command replaces the Entrypoint and
// drops the Cmd; args alone replace the Cmd.
func commandLine(command, args, entrypoint, cmd []string) ([]string, error) {
	var out []string
	switch {
	case len(command) > 0:
		out = slices.Concat(command, args)
	case len(args) > 0:
		out = slices.Concat(entrypoint, args)
	default:
		out = slices.Concat(entrypoint, cmd)
	}
	if len(out) == 0 {
		return nil, fieldErrorf(containerScope, "command", "no command: neither the config nor the image gives one")
	}
	return out, nil
}

// env is the image's environment, then HOSTNAME, then the config's envs;
// a later value of a name replaces an earlier one in its place. PATH is
// set to the usual default if nothing sets it.
func (b *containerBuilder) env() ([]string, error) {
	var e envList
	for _, kv := range b.img.Env {
		e.set(kv)
	}
	host, err := b.hostname()
	if err != nil {
		return nil, err
	}
	e.set("HOSTNAME=" + host)
	for i, kv := range b.cfg.GetEnvs() {
		if kv.GetKey() == "" {
			return nil, fieldErrorf(containerScope, fmt.Sprintf("envs[%d]", i), "empty name")
		}
		e.set(kv.GetKey() + "=" + string(kv.GetValue()))
	}
	if _, ok := e.index["PATH"]; !ok {
		e.set(defaultPath)
	}
	return e.list, nil
}

// hostname is the pod's hostname, or the host's with host network.
func (b *containerBuilder) hostname() (string, error) {
	if b.hostNet() {
		h, err := os.Hostname()
		if err != nil {
			return "", fmt.Errorf("ocispec: host name: %w", err)
		}
		return h, nil
	}
	return b.sandbox.GetHostname(), nil
}

type envList struct {
	list  []string
	index map[string]int
}

func (e *envList) set(kv string) {
	if e.index == nil {
		e.index = map[string]int{}
	}
	name := kv
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			name = kv[:i]
			break
		}
	}
	if i, ok := e.index[name]; ok {
		e.list[i] = kv
		return
	}
	e.index[name] = len(e.list)
	e.list = append(e.list, kv)
}

func (b *containerBuilder) sandboxNS() *runtime.NamespaceOption {
	return b.sandbox.GetLinux().GetSecurityContext().GetNamespaceOptions()
}

func (b *containerBuilder) hostNet() bool {
	return b.sandboxNS().GetNetwork() == runtime.NamespaceMode_NODE
}

func (b *containerBuilder) hostIPC() bool {
	return b.sandboxNS().GetIpc() == runtime.NamespaceMode_NODE
}

// namespaces: a new mount namespace; the sandbox's network, IPC and UTS
// namespaces (or none, the host's, when the pod has NODE); pid as the
// container's options say: the sandbox's (POD), its own (CONTAINER), the
// host's (NODE) or a target container's (TARGET); the pod's user
// namespace when it has one.
func (b *containerBuilder) namespaces() error {
	ns := []specs.LinuxNamespace{{Type: specs.MountNamespace}}
	join := func(t specs.LinuxNamespaceType, path, name string) error {
		if path == "" && b.p.SandboxPid > 0 {
			path = "/proc/" + strconv.Itoa(b.p.SandboxPid) + "/ns/" + name
		}
		if path == "" {
			return fieldErrorf(containerScope, "namespace_options", "no %s namespace of the sandbox to join (no path, no sandbox pid)", name)
		}
		ns = append(ns, specs.LinuxNamespace{Type: t, Path: path})
		return nil
	}
	if !b.hostNet() {
		if err := join(specs.NetworkNamespace, b.p.NetNSPath, "net"); err != nil {
			return err
		}
		if err := join(specs.UTSNamespace, b.p.UTSNSPath, "uts"); err != nil {
			return err
		}
	}
	if !b.hostIPC() {
		if err := join(specs.IPCNamespace, b.p.IPCNSPath, "ipc"); err != nil {
			return err
		}
	}
	switch mode := b.sc.GetNamespaceOptions().GetPid(); mode {
	case runtime.NamespaceMode_POD:
		if err := join(specs.PIDNamespace, b.p.PIDNSPath, "pid"); err != nil {
			return err
		}
	case runtime.NamespaceMode_CONTAINER:
		ns = append(ns, specs.LinuxNamespace{Type: specs.PIDNamespace})
	case runtime.NamespaceMode_TARGET:
		if b.p.TargetPIDNSPath == "" {
			return fieldErrorf(containerScope, "namespace_options.pid", "TARGET %q without the target's pid namespace", b.sc.GetNamespaceOptions().GetTargetId())
		}
		ns = append(ns, specs.LinuxNamespace{Type: specs.PIDNamespace, Path: b.p.TargetPIDNSPath})
	case runtime.NamespaceMode_NODE:
	default:
		return fieldErrorf(containerScope, "namespace_options.pid", "unknown mode %d", mode)
	}
	b.spec.Linux.Namespaces = ns
	userNS, err := containerUserNS(b.sandbox, b.sc)
	if err != nil || userNS == nil {
		return err
	}
	path := b.p.UserNSPath
	if path == "" && b.p.SandboxPid > 0 {
		path = "/proc/" + strconv.Itoa(b.p.SandboxPid) + "/ns/user"
	}
	if path == "" {
		return fieldErrorf(containerScope, "namespace_options.userns_options", "no user namespace of the sandbox to join (no path, no sandbox pid)")
	}
	userNS.apply(b.spec.Linux, path)
	return nil
}

// mounts: the kernel filesystems, the cgroup tree (read-only unless
// privileged), the pod's /etc files and /dev/shm, then the config's
// mounts over them.
func (b *containerBuilder) mounts() error {
	own, rootProp, err := criMounts(b.cfg.GetMounts())
	if err != nil {
		return err
	}
	cgOpt := "ro"
	if b.privileged() {
		cgOpt = "rw"
	}
	defaults := append(baseMounts(b.privileged()),
		specs.Mount{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup",
			Options: []string{"nosuid", "noexec", "nodev", "relatime", cgOpt}})
	ro := b.sc.GetReadonlyRootfs()
	for _, f := range []struct{ dst, src string }{
		{"/etc/hosts", b.p.HostsPath}, {"/etc/resolv.conf", b.p.ResolvConfPath}, {"/etc/hostname", b.p.HostnamePath},
	} {
		if f.src != "" {
			defaults = append(defaults, bindMount(f.dst, f.src, ro))
		}
	}
	shm := b.p.ShmPath
	if b.hostIPC() {
		shm = "/dev/shm"
	}
	defaults = append(defaults, shmMount(shm, 0))
	if userNS, _ := containerUserNS(b.sandbox, b.sc); userNS != nil && b.hostNet() {
		defaults = hostSysfs(defaults)
	}
	b.spec.Mounts = mergeMounts(defaults, own)
	b.spec.Linux.RootfsPropagation = rootProp
	return nil
}

// devices: the config's devices; with privileged, every host device and a
// device cgroup that allows all.
func (b *containerBuilder) devices() error {
	devs, rules, err := criDevices(b.cfg.GetDevices())
	if err != nil {
		return err
	}
	rules = append([]specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}}, rules...)
	if b.privileged() {
		host, err := hostDevices()
		if err != nil {
			return fmt.Errorf("ocispec: host devices: %w", err)
		}
		devs = mergeDevices(host, devs)
		rules = []specs.LinuxDeviceCgroup{{Allow: true, Access: "rwm"}}
	}
	b.spec.Linux.Devices = devs
	if b.spec.Linux.Resources == nil {
		b.spec.Linux.Resources = &specs.LinuxResources{}
	}
	b.spec.Linux.Resources.Devices = rules
	return nil
}

// mergeDevices keeps the config's device where a host device has the
// same container path.
func mergeDevices(host, own []specs.LinuxDevice) []specs.LinuxDevice {
	out := slices.DeleteFunc(host, func(h specs.LinuxDevice) bool {
		return slices.ContainsFunc(own, func(o specs.LinuxDevice) bool { return o.Path == h.Path })
	})
	return append(out, own...)
}

func (b *containerBuilder) resources() error {
	r, err := linuxResources(b.cfg.GetLinux().GetResources())
	if err != nil {
		return err
	}
	if b.spec.Linux.Resources != nil {
		r.Devices = b.spec.Linux.Resources.Devices
	}
	b.spec.Linux.Resources = r
	parent := b.p.CgroupParent
	if parent == "" {
		parent = b.sandbox.GetLinux().GetCgroupParent()
	}
	b.spec.Linux.CgroupsPath, err = cgroupsPath(containerScope, parent, b.p.ID)
	if err != nil {
		return err
	}
	b.spec.Linux.Sysctl, err = sysctls(sandboxScope, b.sandbox.GetLinux().GetSysctls(), b.hostNet(), b.hostIPC())
	return err
}

// security: capabilities, seccomp, AppArmor, SELinux, masked and
// read-only paths. Privileged means every capability, no seccomp, no
// masked or read-only paths.
func (b *containerBuilder) security() error {
	if err := checkSELinux(containerScope, b.sc.GetSelinuxOptions()); err != nil {
		return err
	}
	if b.privileged() {
		b.spec.Process.Capabilities = capSets(kernelCaps(), nil)
		return nil
	}
	caps, err := containerCaps(b.sc.GetCapabilities())
	if err != nil {
		return err
	}
	b.spec.Process.Capabilities = caps
	//lint:ignore SA1019 the deprecated path is read when the typed field is unset, as the CRI asks
	b.spec.Linux.Seccomp, err = seccompFor(containerScope, b.sc.GetSeccomp(), b.sc.GetSeccompProfilePath(), caps.Bounding)
	if err != nil {
		return err
	}
	//lint:ignore SA1019 the deprecated name is read when the typed field is unset, as the CRI asks
	b.spec.Process.ApparmorProfile, err = appArmorProfile(containerScope, b.sc.GetApparmor(), b.sc.GetApparmorProfile())
	if err != nil {
		return err
	}
	b.spec.Linux.MaskedPaths = orDefault(b.sc.GetMaskedPaths(), defaultMaskedPaths)
	b.spec.Linux.ReadonlyPaths = orDefault(b.sc.GetReadonlyPaths(), defaultReadonlyPaths)
	return nil
}

func orDefault(own, def []string) []string {
	if len(own) > 0 {
		return slices.Clone(own)
	}
	return slices.Clone(def)
}

func (b *containerBuilder) annotations() map[string]string {
	md := b.sandbox.GetMetadata()
	return map[string]string{
		AnnotationContainerType: ContainerTypeContainer,
		AnnotationSandboxID:     b.p.SandboxID,
		AnnotationSandboxName:   md.GetName(),
		AnnotationSandboxNS:     md.GetNamespace(),
		AnnotationSandboxUID:    md.GetUid(),
		AnnotationContainerName: b.cfg.GetMetadata().GetName(),
		AnnotationImageName:     b.p.ImageName,
	}
}
