package ocispec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// wantErr checks an error is a config error containing text (or no error
// when text is "").
func wantErr(t *testing.T, err error, text string) {
	t.Helper()
	switch {
	case text == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case text != "" && err == nil:
		t.Fatalf("no error, want one with %q", text)
	case text != "" && (!strings.Contains(err.Error(), text) || !errdefs.IsInvalidArgument(err)):
		t.Fatalf("error %q, want an invalid-argument error with %q", err, text)
	}
}

func TestCommandLine(t *testing.T) {
	ep, cmd := []string{"/ep"}, []string{"cmd1", "cmd2"}
	tests := []struct {
		name          string
		command, args []string
		want          string
	}{
		{"image only", nil, nil, "[/ep cmd1 cmd2]"},
		{"command replaces entrypoint and drops cmd", []string{"/c"}, nil, "[/c]"},
		{"command and args", []string{"/c"}, []string{"a"}, "[/c a]"},
		{"args replace cmd", nil, []string{"a", "b"}, "[/ep a b]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := commandLine(tt.command, tt.args, ep, cmd)
			if err != nil || fmt.Sprint(got) != tt.want {
				t.Fatalf("got %v, %v; want %s", got, err, tt.want)
			}
		})
	}
	_, err := commandLine(nil, nil, nil, nil)
	wantErr(t, err, "container config: command: no command")
}

func podConfig(hostNet bool) *runtime.PodSandboxConfig {
	mode := runtime.NamespaceMode_POD
	if hostNet {
		mode = runtime.NamespaceMode_NODE
	}
	return &runtime.PodSandboxConfig{
		Metadata: &runtime.PodSandboxMetadata{Name: "pod", Namespace: "ns", Uid: "uid"},
		Hostname: "podhost",
		Linux: &runtime.LinuxPodSandboxConfig{
			CgroupParent:    "/kubepods/pod1",
			SecurityContext: &runtime.LinuxSandboxSecurityContext{NamespaceOptions: &runtime.NamespaceOption{Network: mode}},
		},
	}
}

func containerParams(t *testing.T) ContainerParams {
	rootfs := t.TempDir()
	os.MkdirAll(filepath.Join(rootfs, "etc"), 0o755)
	os.WriteFile(filepath.Join(rootfs, "etc", "passwd"), []byte("root:x:0:0::/:/bin/sh\napp:x:1000:1001::/home/app:/bin/sh\n"), 0o644)
	os.WriteFile(filepath.Join(rootfs, "etc", "group"), []byte("root:x:0:\napp:x:1001:\nwheel:x:10:app,root\nstaff:x:50:app\n"), 0o644)
	return ContainerParams{ID: "c1", SandboxID: "sb1", RootfsPath: rootfs, SandboxPid: 42}
}

func baseContainer() *runtime.ContainerConfig {
	return &runtime.ContainerConfig{
		Metadata: &runtime.ContainerMetadata{Name: "app"},
		Command:  []string{"/bin/app"},
		Linux:    &runtime.LinuxContainerConfig{SecurityContext: &runtime.LinuxContainerSecurityContext{}},
	}
}

func TestContainerEnvAndCwd(t *testing.T) {
	cfg := baseContainer()
	cfg.Envs = []*runtime.KeyValue{{Key: "A", Value: []byte("cri")}, {Key: "C", Value: []byte("3")}}
	img := ImageConfig{Env: []string{"A=img", "B=2"}, WorkingDir: "/srv"}
	s, err := Container(cfg, podConfig(false), img, containerParams(t))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"A=cri", "B=2", "HOSTNAME=podhost", "C=3", defaultPath}
	if !slices.Equal(s.Process.Env, want) {
		t.Errorf("env %q, want %q", s.Process.Env, want)
	}
	if s.Process.Cwd != "/srv" {
		t.Errorf("cwd %q, want the image's", s.Process.Cwd)
	}
	cfg.WorkingDir = "/work"
	s, _ = Container(cfg, podConfig(false), ImageConfig{}, containerParams(t))
	if s.Process.Cwd != "/work" {
		t.Errorf("cwd %q, want the config's", s.Process.Cwd)
	}
	s, _ = Container(baseContainer(), podConfig(false), ImageConfig{}, containerParams(t))
	if s.Process.Cwd != "/" {
		t.Errorf("cwd %q, want /", s.Process.Cwd)
	}
	cfg.Envs = []*runtime.KeyValue{{Key: "", Value: []byte("x")}}
	_, err = Container(cfg, podConfig(false), ImageConfig{}, containerParams(t))
	wantErr(t, err, "envs[0]: empty name")
}

func i64(v int64) *runtime.Int64Value { return &runtime.Int64Value{Value: v} }

func TestContainerUser(t *testing.T) {
	tests := []struct {
		name    string
		sc      *runtime.LinuxContainerSecurityContext
		image   string
		want    string // "uid:gid groups"
		wantErr string
	}{
		{"image default is root", nil, "", "0:0 [0 10]", ""},
		{"image uid", nil, "1000", "1000:1001 [1001 10 50]", ""},
		{"image uid:gid", nil, "1000:7", "1000:7 [7]", ""},
		{"image name", nil, "app", "1000:1001 [1001 10 50]", ""},
		{"image name:group", nil, "app:staff", "1000:50 [50]", ""},
		{"image unknown uid", nil, "4242", "4242:0 [0]", ""},
		{"image unknown name", nil, "nobody", "", "image user: unable to find user nobody"},
		{"run_as_user wins over image", &runtime.LinuxContainerSecurityContext{RunAsUser: i64(1000)}, "0", "1000:1001 [1001 10 50]", ""},
		{"run_as_user and group", &runtime.LinuxContainerSecurityContext{RunAsUser: i64(1000), RunAsGroup: i64(3000)}, "", "1000:3000 [3000]", ""},
		{"run_as_username", &runtime.LinuxContainerSecurityContext{RunAsUsername: "app", SupplementalGroups: []int64{9}}, "", "1000:1001 [1001 10 50 9]", ""},
		{"strict policy", &runtime.LinuxContainerSecurityContext{RunAsUsername: "app", SupplementalGroups: []int64{9},
			SupplementalGroupsPolicy: runtime.SupplementalGroupsPolicy_Strict}, "", "1000:1001 [1001 9]", ""},
		{"unknown username", &runtime.LinuxContainerSecurityContext{RunAsUsername: "ghost"}, "", "", "run_as_username: unable to find user ghost"},
		{"both user fields", &runtime.LinuxContainerSecurityContext{RunAsUser: i64(1), RunAsUsername: "app"}, "", "", "run_as_user: run_as_user and run_as_username are both set"},
		{"group without user", &runtime.LinuxContainerSecurityContext{RunAsGroup: i64(1)}, "", "", "run_as_group: run_as_group needs"},
		{"negative uid", &runtime.LinuxContainerSecurityContext{RunAsUser: i64(-1)}, "", "", "uid -1 out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := baseContainer()
			if tt.sc != nil {
				cfg.Linux.SecurityContext = tt.sc
			}
			s, err := Container(cfg, podConfig(false), ImageConfig{User: tt.image}, containerParams(t))
			wantErr(t, err, tt.wantErr)
			if err != nil {
				return
			}
			u := s.Process.User
			if got := fmt.Sprintf("%d:%d %v", u.UID, u.GID, u.AdditionalGids); got != tt.want {
				t.Fatalf("user %s, want %s", got, tt.want)
			}
		})
	}
}

func TestCapabilities(t *testing.T) {
	all := len(kernelCaps())
	tests := []struct {
		name       string
		add, drop  []string
		wantLen    int
		has, hasnt []string
		wantErr    string
	}{
		{"defaults", nil, nil, len(DefaultCaps), []string{"CAP_CHOWN", "CAP_KILL"}, []string{"CAP_SYS_ADMIN"}, ""},
		{"add short name", []string{"sys_admin"}, nil, len(DefaultCaps) + 1, []string{"CAP_SYS_ADMIN"}, nil, ""},
		{"drop", nil, []string{"CAP_NET_RAW"}, len(DefaultCaps) - 1, nil, []string{"CAP_NET_RAW"}, ""},
		{"drop all add one", []string{"NET_BIND_SERVICE"}, []string{"ALL"}, 1, []string{"CAP_NET_BIND_SERVICE"}, []string{"CAP_CHOWN"}, ""},
		{"add all drop one", []string{"ALL"}, []string{"SYS_ADMIN"}, all - 1, []string{"CAP_SYS_MODULE"}, []string{"CAP_SYS_ADMIN"}, ""},
		{"drop wins", []string{"NET_ADMIN"}, []string{"NET_ADMIN"}, len(DefaultCaps), nil, []string{"CAP_NET_ADMIN"}, ""},
		{"unknown", []string{"FLY"}, nil, 0, nil, nil, "capabilities.add[0]: unknown capability \"FLY\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := containerCaps(&runtime.Capability{AddCapabilities: tt.add, DropCapabilities: tt.drop})
			wantErr(t, err, tt.wantErr)
			if err != nil {
				return
			}
			if len(c.Bounding) != tt.wantLen || !slices.Equal(c.Bounding, c.Effective) || !slices.Equal(c.Bounding, c.Permitted) {
				t.Fatalf("caps %v (want %d, effective = permitted = bounding)", c.Bounding, tt.wantLen)
			}
			for _, h := range tt.has {
				if !slices.Contains(c.Bounding, h) {
					t.Errorf("no %s", h)
				}
			}
			for _, h := range tt.hasnt {
				if slices.Contains(c.Bounding, h) {
					t.Errorf("has %s", h)
				}
			}
			if len(c.Inheritable) != 0 {
				t.Errorf("inheritable %v, want none", c.Inheritable)
			}
		})
	}
}

func idmap(container, host, size uint32) []*runtime.IDMapping {
	return []*runtime.IDMapping{{ContainerId: container, HostId: host, Length: size}}
}

func TestMounts(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "made", "by", "us")
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink(file, link)
	tests := []struct {
		name    string
		m       *runtime.Mount
		want    string // destination source options
		rootfs  string
		wantErr string
	}{
		{"private rw", &runtime.Mount{ContainerPath: "/data", HostPath: file}, "/data " + file + " [rbind rprivate rw]", "", ""},
		{"readonly slave", &runtime.Mount{ContainerPath: "/data/", HostPath: file, Readonly: true,
			Propagation: runtime.MountPropagation_PROPAGATION_HOST_TO_CONTAINER}, "/data " + file + " [rbind rslave ro]", "rslave", ""},
		{"shared", &runtime.Mount{ContainerPath: "/d", HostPath: file,
			Propagation: runtime.MountPropagation_PROPAGATION_BIDIRECTIONAL}, "/d " + file + " [rbind rshared rw]", "rshared", ""},
		{"recursive ro", &runtime.Mount{ContainerPath: "/d", HostPath: file, Readonly: true, RecursiveReadOnly: true},
			"/d " + file + " [rbind rprivate rro]", "", ""},
		{"recursive ro needs ro", &runtime.Mount{ContainerPath: "/d", HostPath: file, RecursiveReadOnly: true}, "", "", "mount[0]: recursive_read_only needs"},
		{"extra options", &runtime.Mount{ContainerPath: "/d", HostPath: file, MountOptions: []string{"noexec"}},
			"/d " + file + " [rbind rprivate noexec rw]", "", ""},
		{"the daemon's ro last", &runtime.Mount{ContainerPath: "/d", HostPath: file, Readonly: true, MountOptions: []string{"rw", "suid"}},
			"/d " + file + " [rbind rprivate rw suid ro]", "", ""},
		{"symlink followed", &runtime.Mount{ContainerPath: "/d", HostPath: link}, "/d " + file + " [rbind rprivate rw]", "", ""},
		{"missing host path made a dir", &runtime.Mount{ContainerPath: "/d", HostPath: missing}, "/d " + missing + " [rbind rprivate rw]", "", ""},
		{"relative container path", &runtime.Mount{ContainerPath: "d", HostPath: file}, "", "", "mount[0]: container path \"d\" is not absolute"},
		{"relative host path", &runtime.Mount{ContainerPath: "/d", HostPath: "x"}, "", "", "mount[0]: host path x: not an absolute path"},
		{"image volume", &runtime.Mount{ContainerPath: "/d", Image: &runtime.ImageSpec{Image: "busybox"}}, "", "", "image volumes are not supported"},
		{"id-mapped", &runtime.Mount{ContainerPath: "/d", HostPath: file, UidMappings: idmap(0, 1000, 10), GidMappings: idmap(0, 2000, 10)},
			"/d " + file + " [rbind rprivate rw] [{0 1000 10}] [{0 2000 10}]", "", ""},
		{"id-mapped needs both", &runtime.Mount{ContainerPath: "/d", HostPath: file, UidMappings: idmap(0, 1000, 10)},
			"", "", "mount[0]: an id-mapped mount needs both uid_mappings and gid_mappings"},
		{"id mapping past 2^32", &runtime.Mount{ContainerPath: "/d", HostPath: file, UidMappings: idmap(0, 1<<32-1, 10), GidMappings: idmap(0, 2000, 10)},
			"", "", "id mapping 0 4294967295 10: length 0 or past 2^32"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, prop, err := criMounts([]*runtime.Mount{tt.m})
			wantErr(t, err, tt.wantErr)
			if err != nil {
				return
			}
			got := fmt.Sprintf("%s %s %v", ms[0].Destination, ms[0].Source, ms[0].Options)
			if ms[0].UIDMappings != nil || ms[0].GIDMappings != nil {
				got += fmt.Sprintf(" %v %v", ms[0].UIDMappings, ms[0].GIDMappings)
			}
			if got != tt.want || prop != tt.rootfs {
				t.Fatalf("mount %s, rootfs %q; want %s, %q", got, prop, tt.want, tt.rootfs)
			}
		})
	}
	if fi, err := os.Stat(missing); err != nil || !fi.IsDir() {
		t.Errorf("missing host path not made a dir: %v", err)
	}
}

// TestMountErrorNamesField: a host path that cannot be made is reported
// with the mount's index and path, and keeps the cause.
func TestMountErrorNamesField(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	bad := filepath.Join(file, "below-a-file")
	ms := []*runtime.Mount{
		{ContainerPath: "/a", HostPath: file}, {ContainerPath: "/b", HostPath: file}, {ContainerPath: "/x", HostPath: bad},
	}
	_, _, err := criMounts(ms)
	wantErr(t, err, "container config: mount[2]: host path "+bad+": ")
	if !errors.Is(err, fs.ErrNotExist) && !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("cause lost: %v", err)
	}
}

func TestContainerMountsMerge(t *testing.T) {
	cfg := baseContainer()
	dir := t.TempDir()
	cfg.Mounts = []*runtime.Mount{
		{ContainerPath: "/data/sub", HostPath: dir}, {ContainerPath: "/data", HostPath: dir},
		{ContainerPath: "/etc/hosts", HostPath: filepath.Join(dir, "myhosts")},
	}
	p := containerParams(t)
	p.HostsPath, p.ResolvConfPath, p.ShmPath = "/pod/hosts", "/pod/resolv.conf", "/pod/shm"
	s, err := Container(cfg, podConfig(false), ImageConfig{}, p)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	var order []string
	for _, m := range s.Mounts {
		if _, dup := got[m.Destination]; dup {
			t.Fatalf("two mounts at %s", m.Destination)
		}
		got[m.Destination] = m.Source
		order = append(order, m.Destination)
	}
	for dst, src := range map[string]string{"/etc/resolv.conf": "/pod/resolv.conf", "/dev/shm": "/pod/shm",
		"/etc/hosts": filepath.Join(dir, "myhosts"), "/proc": "proc", "/sys/fs/cgroup": "cgroup"} {
		if got[dst] != src {
			t.Errorf("%s from %q, want %q", dst, got[dst], src)
		}
	}
	if slices.Index(order, "/data") > slices.Index(order, "/data/sub") {
		t.Errorf("child mounted before its parent: %v", order)
	}
}

func TestDevices(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	devs, rules, err := criDevices([]*runtime.Device{{ContainerPath: "/dev/mynull", HostPath: "/dev/null", Permissions: "rw"}})
	if err != nil {
		t.Fatal(err)
	}
	d, r := devs[0], rules[0]
	if d.Path != "/dev/mynull" || d.Type != "c" || d.Major != 1 || d.Minor != 3 || !r.Allow || r.Access != "rw" || *r.Major != 1 || *r.Minor != 3 {
		t.Fatalf("device %+v rule %+v", d, r)
	}
	_, _, err = criDevices([]*runtime.Device{{ContainerPath: "/dev/x", HostPath: file}})
	wantErr(t, err, "device[0] host path "+file+": not a device")
	_, _, err = criDevices([]*runtime.Device{{ContainerPath: "/dev/x", HostPath: "/dev/null", Permissions: "rx"}})
	wantErr(t, err, "device[0] permissions")
	_, _, err = criDevices([]*runtime.Device{{ContainerPath: "/dev/x", HostPath: "/nonexistent"}})
	wantErr(t, err, "no such file or directory")
}

func TestResources(t *testing.T) {
	defer func(f func() bool) { hugetlbAvailable = f }(hugetlbAvailable)
	hugetlbAvailable = func() bool { return true }
	r, err := linuxResources(&runtime.LinuxContainerResources{
		CpuPeriod: 100000, CpuQuota: 50000, CpuShares: 512, CpusetCpus: "0", CpusetMems: "0",
		MemoryLimitInBytes: 1 << 20, MemorySwapLimitInBytes: 2 << 20,
		HugepageLimits: []*runtime.HugepageLimit{{PageSize: "2MB", Limit: 4 << 20}},
		Unified:        map[string]string{"memory.high": "1000000"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if *r.CPU.Period != 100000 || *r.CPU.Quota != 50000 || *r.CPU.Shares != 512 || r.CPU.Cpus != "0" || r.CPU.Mems != "0" {
		t.Errorf("cpu %+v", r.CPU)
	}
	if *r.Memory.Limit != 1<<20 || *r.Memory.Swap != 2<<20 {
		t.Errorf("memory %+v", r.Memory)
	}
	if len(r.HugepageLimits) != 1 || r.HugepageLimits[0].Pagesize != "2MB" || r.Unified["memory.high"] != "1000000" {
		t.Errorf("hugepages %+v unified %v", r.HugepageLimits, r.Unified)
	}
	// Where runc has no hugetlb controller the limits (kubelet sends 0 for
	// every page size) are dropped, not failing every start.
	hugetlbAvailable = func() bool { return false }
	noHuge, err := linuxResources(&runtime.LinuxContainerResources{HugepageLimits: []*runtime.HugepageLimit{{PageSize: "2MB"}, {PageSize: "1GB"}}})
	hugetlbAvailable = func() bool { return true }
	if err != nil || len(noHuge.HugepageLimits) != 0 {
		t.Errorf("hugepage limits without a hugetlb controller: %+v %v", noHuge.HugepageLimits, err)
	}
	empty, _ := linuxResources(&runtime.LinuxContainerResources{})
	if empty.CPU != nil || empty.Memory != nil {
		t.Errorf("zero resources set something: %+v", empty)
	}
	for _, tt := range []struct {
		r    *runtime.LinuxContainerResources
		want string
	}{
		{&runtime.LinuxContainerResources{CpuShares: -1}, "resources.cpu_shares"},
		{&runtime.LinuxContainerResources{MemoryLimitInBytes: 10, MemorySwapLimitInBytes: 5}, "resources.memory_swap_limit_in_bytes"},
		{&runtime.LinuxContainerResources{HugepageLimits: []*runtime.HugepageLimit{{PageSize: "2M"}}}, "resources.hugepage_limits[0]"},
	} {
		_, err := linuxResources(tt.r)
		wantErr(t, err, tt.want)
	}
	_, err = oomScoreAdj(1001)
	wantErr(t, err, "resources.oom_score_adj")
}

func TestOOMScoreRestricted(t *testing.T) {
	old := oomFloor
	t.Cleanup(func() { oomFloor = old })
	oomFloor = func() int { return -500 }
	if v, _ := oomScoreAdj(-998); *v != -500 {
		t.Errorf("oom %d, want raised to -500", *v)
	}
	if v, _ := oomScoreAdj(300); *v != 300 {
		t.Errorf("oom %d, want 300", *v)
	}
}

func TestCgroupsPath(t *testing.T) {
	tests := []struct{ parent, want, wantErr string }{
		{"/kubepods/burstable/pod1", "/kubepods/burstable/pod1/c1", ""},
		{"kubepods", "/kubepods/c1", ""},
		{"", "/c1", ""},
		{"kubepods-burstable.slice", "", "cgroup_parent: \"kubepods-burstable.slice\" is a systemd slice"},
		{"/a/../b", "", "has a \"..\" element"},
	}
	for _, tt := range tests {
		got, err := cgroupsPath(containerScope, tt.parent, "c1")
		wantErr(t, err, tt.wantErr)
		if got != tt.want {
			t.Errorf("%q: %q, want %q", tt.parent, got, tt.want)
		}
	}
}

func TestSysctls(t *testing.T) {
	tests := []struct {
		name             string
		in               map[string]string
		hostNet, hostIPC bool
		wantErr          string
	}{
		{"net and ipc", map[string]string{"net.ipv4.ip_forward": "1", "kernel.shm_rmid_forced": "1", "fs.mqueue.msg_max": "20"}, false, false, ""},
		{"slashes", map[string]string{"net/ipv4/ip_forward": "1"}, false, false, ""},
		{"not namespaced", map[string]string{"vm.swappiness": "1"}, false, false, "sysctls[vm.swappiness]: not a namespaced sysctl"},
		{"net with host network", map[string]string{"net.core.somaxconn": "1"}, true, false, "needs the pod's own network namespace"},
		{"ipc with host ipc", map[string]string{"kernel.msgmax": "1"}, false, true, "needs the pod's own IPC namespace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := sysctls(sandboxScope, tt.in, tt.hostNet, tt.hostIPC)
			wantErr(t, err, tt.wantErr)
			if err == nil && len(out) != len(tt.in) {
				t.Fatalf("sysctls %v", out)
			}
			if err == nil && tt.name == "slashes" && out["net.ipv4.ip_forward"] != "1" {
				t.Fatalf("slashes not made dots: %v", out)
			}
		})
	}
}

func nsTypes(ns []specs.LinuxNamespace) string {
	var s []string
	for _, n := range ns {
		s = append(s, string(n.Type)+"="+n.Path)
	}
	return strings.Join(s, " ")
}

func TestSandbox(t *testing.T) {
	// the refusals below include SELinux options, refused on a host with SELinux
	oldSELinux := selinuxEnabled
	t.Cleanup(func() { selinuxEnabled = oldSELinux })
	selinuxEnabled = func() bool { return true }
	p := SandboxParams{ID: "sb1", PauseArgs: []string{"/pause"}, RootfsPath: t.TempDir(), NetNSPath: "/run/netns/x"}
	cfg := podConfig(false)
	cfg.Linux.Sysctls = map[string]string{"net.ipv4.ip_forward": "1"}
	cfg.Linux.SecurityContext.Seccomp = &runtime.SecurityProfile{ProfileType: runtime.SecurityProfile_RuntimeDefault}
	s, err := Sandbox(cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	if got := nsTypes(s.Linux.Namespaces); got != "mount= pid= ipc= network=/run/netns/x uts=" {
		t.Errorf("namespaces %s", got)
	}
	if s.Hostname != "podhost" || !s.Root.Readonly || s.Linux.CgroupsPath != "/kubepods/pod1/sb1" {
		t.Errorf("hostname %q readonly %v cgroup %q", s.Hostname, s.Root.Readonly, s.Linux.CgroupsPath)
	}
	if *s.Process.OOMScoreAdj != restrictOOMScoreAdj(-998) || len(s.Process.Capabilities.Bounding) != 0 || !s.Process.NoNewPrivileges {
		t.Errorf("process %+v", s.Process)
	}
	if s.Linux.Seccomp == nil || s.Linux.Sysctl["net.ipv4.ip_forward"] != "1" {
		t.Errorf("seccomp %v sysctls %v", s.Linux.Seccomp != nil, s.Linux.Sysctl)
	}
	if s.Annotations[AnnotationContainerType] != ContainerTypeSandbox || s.Annotations[AnnotationSandboxName] != "pod" {
		t.Errorf("annotations %v", s.Annotations)
	}
	shm := s.Mounts[slices.IndexFunc(s.Mounts, func(m specs.Mount) bool { return m.Destination == "/dev/shm" })]
	if !slices.Contains(shm.Options, fmt.Sprintf("size=%d", DefaultShmSize)) {
		t.Errorf("shm %+v", shm)
	}

	host := podConfig(true)
	host.Linux.SecurityContext.NamespaceOptions.Pid = runtime.NamespaceMode_NODE
	host.Linux.SecurityContext.NamespaceOptions.Ipc = runtime.NamespaceMode_NODE
	p.NetNSPath = ""
	s, err = Sandbox(host, p)
	if err != nil {
		t.Fatal(err)
	}
	if got := nsTypes(s.Linux.Namespaces); got != "mount=" || s.Hostname != "" {
		t.Errorf("host namespaces %s hostname %q", got, s.Hostname)
	}

	for _, tt := range []struct {
		mutate func(*runtime.PodSandboxConfig, *SandboxParams)
		want   string
	}{
		{func(c *runtime.PodSandboxConfig, p *SandboxParams) { p.NetNSPath = "" }, "pod network needs a pinned network namespace"},
		{func(c *runtime.PodSandboxConfig, p *SandboxParams) {
			c.Linux.SecurityContext.NamespaceOptions.UsernsOptions = &runtime.UserNamespace{Mode: runtime.NamespaceMode_POD}
		}, "userns_options.uids: 0 mappings: exactly one is supported"},
		{func(c *runtime.PodSandboxConfig, p *SandboxParams) {
			m := []*runtime.IDMapping{{HostId: 1000, Length: 10}, {ContainerId: 10, HostId: 5000, Length: 10}}
			c.Linux.SecurityContext.NamespaceOptions.UsernsOptions = &runtime.UserNamespace{Mode: runtime.NamespaceMode_POD, Uids: m, Gids: m}
		}, "userns_options.uids: 2 mappings"},
		{func(c *runtime.PodSandboxConfig, p *SandboxParams) {
			m := []*runtime.IDMapping{{ContainerId: 1, HostId: 1000, Length: 10}}
			c.Linux.SecurityContext.NamespaceOptions.UsernsOptions = &runtime.UserNamespace{Mode: runtime.NamespaceMode_POD, Uids: m, Gids: m}
		}, "container id 0 (root) must be mapped"},
		{func(c *runtime.PodSandboxConfig, p *SandboxParams) {
			m := []*runtime.IDMapping{{HostId: 1000, Length: 10}}
			c.Linux.SecurityContext.NamespaceOptions.UsernsOptions = &runtime.UserNamespace{Mode: runtime.NamespaceMode_POD, Uids: m,
				Gids: []*runtime.IDMapping{{HostId: 1<<32 - 5, Length: 10}}}
		}, "userns_options.gids: host ids 4294967291+10 go past 2^32"},
		{func(c *runtime.PodSandboxConfig, p *SandboxParams) {
			c.Linux.SecurityContext.NamespaceOptions.UsernsOptions = &runtime.UserNamespace{Mode: runtime.NamespaceMode_CONTAINER}
		}, "mode CONTAINER: a pod's user namespace is NODE or POD"},
		{func(c *runtime.PodSandboxConfig, p *SandboxParams) {
			c.Linux.SecurityContext.NamespaceOptions.UsernsOptions = &runtime.UserNamespace{Mode: runtime.NamespaceMode_TARGET}
		}, "mode TARGET"},
		{func(c *runtime.PodSandboxConfig, p *SandboxParams) {
			c.Linux.Sysctls = map[string]string{"kernel.panic": "1"}
		}, "sandbox config: sysctls[kernel.panic]"},
		{func(c *runtime.PodSandboxConfig, p *SandboxParams) {
			c.Linux.SecurityContext.SelinuxOptions = &runtime.SELinuxOption{Type: "spc_t"}
		}, "SELinux labels are not supported"},
	} {
		c, pp := podConfig(false), p
		pp.NetNSPath = "/run/netns/x"
		tt.mutate(c, &pp)
		_, err := Sandbox(c, pp)
		wantErr(t, err, tt.want)
	}
}

func TestContainerNamespaces(t *testing.T) {
	tests := []struct {
		name    string
		hostNet bool
		pid     runtime.NamespaceMode
		want    string
	}{
		{"pod", false, runtime.NamespaceMode_POD, "mount= network=/run/netns/x uts=/proc/42/ns/uts ipc=/proc/42/ns/ipc pid=/proc/42/ns/pid"},
		{"own pid", false, runtime.NamespaceMode_CONTAINER, "mount= network=/run/netns/x uts=/proc/42/ns/uts ipc=/proc/42/ns/ipc pid="},
		{"host network and pid", true, runtime.NamespaceMode_NODE, "mount= ipc=/proc/42/ns/ipc"},
		{"target", false, runtime.NamespaceMode_TARGET, "mount= network=/run/netns/x uts=/proc/42/ns/uts ipc=/proc/42/ns/ipc pid=/proc/7/ns/pid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := baseContainer()
			cfg.Linux.SecurityContext.NamespaceOptions = &runtime.NamespaceOption{Pid: tt.pid}
			p := containerParams(t)
			p.NetNSPath, p.TargetPIDNSPath = "/run/netns/x", "/proc/7/ns/pid"
			s, err := Container(cfg, podConfig(tt.hostNet), ImageConfig{}, p)
			if err != nil {
				t.Fatal(err)
			}
			if got := nsTypes(s.Linux.Namespaces); got != tt.want {
				t.Fatalf("namespaces %s\nwant %s", got, tt.want)
			}
		})
	}
	p := containerParams(t)
	p.SandboxPid = 0
	_, err := Container(baseContainer(), podConfig(false), ImageConfig{}, p)
	wantErr(t, err, "no net namespace of the sandbox to join")
}

func TestContainerSecurity(t *testing.T) {
	cfg := baseContainer()
	cfg.Linux.SecurityContext.Seccomp = &runtime.SecurityProfile{ProfileType: runtime.SecurityProfile_RuntimeDefault}
	cfg.Linux.SecurityContext.ReadonlyRootfs = true
	cfg.Linux.SecurityContext.NoNewPrivs = true
	s, err := Container(cfg, podConfig(false), ImageConfig{}, containerParams(t))
	if err != nil {
		t.Fatal(err)
	}
	if s.Linux.Seccomp == nil || !s.Root.Readonly || !s.Process.NoNewPrivileges ||
		!slices.Equal(s.Linux.MaskedPaths, defaultMaskedPaths) || !slices.Equal(s.Linux.ReadonlyPaths, defaultReadonlyPaths) {
		t.Errorf("security %+v %+v", s.Process, s.Linux)
	}
	if s.Annotations[AnnotationContainerType] != ContainerTypeContainer || s.Annotations[AnnotationSandboxID] != "sb1" ||
		s.Annotations[AnnotationContainerName] != "app" {
		t.Errorf("annotations %v", s.Annotations)
	}
	cfg.Linux.SecurityContext.MaskedPaths = []string{"/proc/x"}
	s, _ = Container(cfg, podConfig(false), ImageConfig{}, containerParams(t))
	if !slices.Equal(s.Linux.MaskedPaths, []string{"/proc/x"}) {
		t.Errorf("masked paths %v, want the config's", s.Linux.MaskedPaths)
	}

	cfg.Linux.SecurityContext.Privileged = true
	_, err = Container(cfg, podConfig(false), ImageConfig{}, containerParams(t))
	wantErr(t, err, "privileged: the sandbox is not privileged")
	pod := podConfig(false)
	pod.Linux.SecurityContext.Privileged = true
	old := hostDevDir
	t.Cleanup(func() { hostDevDir = old })
	hostDevDir = t.TempDir() // privileged specs list the host's devices: none here
	s, err = Container(cfg, pod, ImageConfig{}, containerParams(t))
	if err != nil {
		t.Fatal(err)
	}
	if s.Linux.Seccomp != nil || len(s.Linux.MaskedPaths) != 0 || len(s.Linux.ReadonlyPaths) != 0 ||
		len(s.Process.Capabilities.Bounding) != len(kernelCaps()) || !s.Linux.Resources.Devices[0].Allow {
		t.Errorf("privileged: seccomp %v masked %v caps %d devices %+v", s.Linux.Seccomp != nil,
			s.Linux.MaskedPaths, len(s.Process.Capabilities.Bounding), s.Linux.Resources.Devices)
	}
	sys := s.Mounts[slices.IndexFunc(s.Mounts, func(m specs.Mount) bool { return m.Destination == "/sys" })]
	if !slices.Contains(sys.Options, "rw") {
		t.Errorf("privileged /sys %v, want rw", sys.Options)
	}
}

func TestLSM(t *testing.T) {
	old := appArmorEnabled
	t.Cleanup(func() { appArmorEnabled = old })
	appArmorEnabled = func() bool { return false }
	for _, tt := range []struct {
		prof    *runtime.SecurityProfile
		wantErr string
	}{
		{nil, ""},
		{&runtime.SecurityProfile{ProfileType: runtime.SecurityProfile_Unconfined}, ""},
		{&runtime.SecurityProfile{ProfileType: runtime.SecurityProfile_RuntimeDefault}, ""},
		{&runtime.SecurityProfile{ProfileType: runtime.SecurityProfile_Localhost, LocalhostRef: "p"}, "AppArmor is not enabled"},
	} {
		name, err := appArmorProfile(containerScope, tt.prof, "")
		wantErr(t, err, tt.wantErr)
		if name != "" {
			t.Errorf("profile %q set", name)
		}
	}
	appArmorEnabled = func() bool { return true }
	if name, err := appArmorProfile(containerScope, nil, "localhost/p"); err != nil || name != "p" {
		t.Errorf("legacy localhost: %q, %v", name, err)
	}
}

// TestSELinuxOptions: on a host without SELinux a pod's and a container's
// SELinux options are accepted and set no label (containerd's and CRI-O's
// behaviour: kubelet passes on the `level: s0` that Kubernetes' volume specs
// give every pod); on a host with SELinux they are refused, naming the field.
func TestSELinuxOptions(t *testing.T) {
	old := selinuxEnabled
	t.Cleanup(func() { selinuxEnabled = old })
	sandboxParams := SandboxParams{ID: "sb1", PauseArgs: []string{"/pause"}, RootfsPath: t.TempDir(), NetNSPath: "/run/netns/x"}
	for _, opt := range []*runtime.SELinuxOption{{Level: "s0"}, {Type: "spc_t"}, {User: "system_u", Role: "system_r", Type: "container_t", Level: "s0:c1,c2"}} {
		pod := podConfig(false)
		pod.Linux.SecurityContext.SelinuxOptions = opt
		ctr := baseContainer()
		ctr.Linux.SecurityContext.SelinuxOptions = opt

		selinuxEnabled = func() bool { return false }
		s, err := Sandbox(pod, sandboxParams)
		if err != nil {
			t.Fatalf("sandbox with %v, no SELinux: %v", opt, err)
		}
		if s.Process.SelinuxLabel != "" || s.Linux.MountLabel != "" {
			t.Errorf("sandbox with %v: labels %q %q, want none", opt, s.Process.SelinuxLabel, s.Linux.MountLabel)
		}
		c, err := Container(ctr, pod, ImageConfig{}, containerParams(t))
		if err != nil {
			t.Fatalf("container with %v, no SELinux: %v", opt, err)
		}
		if c.Process.SelinuxLabel != "" || c.Linux.MountLabel != "" {
			t.Errorf("container with %v: labels %q %q, want none", opt, c.Process.SelinuxLabel, c.Linux.MountLabel)
		}

		selinuxEnabled = func() bool { return true }
		_, err = Sandbox(pod, sandboxParams)
		wantErr(t, err, "selinux_options: SELinux labels are not supported")
		_, err = Container(ctr, podConfig(false), ImageConfig{}, containerParams(t))
		wantErr(t, err, "selinux_options: SELinux labels are not supported")
	}
}

func TestUserNamespace(t *testing.T) {
	uids := []*runtime.IDMapping{{ContainerId: 0, HostId: 100000, Length: 65536}}
	gids := []*runtime.IDMapping{{ContainerId: 0, HostId: 200000, Length: 65536}}
	pod := podConfig(false)
	pod.Linux.SecurityContext.NamespaceOptions.UsernsOptions = &runtime.UserNamespace{Mode: runtime.NamespaceMode_POD, Uids: uids, Gids: gids}
	sp := SandboxParams{ID: "sb1", PauseArgs: []string{"/pause"}, RootfsPath: t.TempDir(), NetNSPath: "/run/netns/x"}
	_, err := Sandbox(pod, sp)
	wantErr(t, err, "with a user namespace the pause process makes the pod's network namespace, but /run/netns/x was given")
	sp.NetNSPath = ""
	s, err := Sandbox(pod, sp)
	if err != nil {
		t.Fatal(err)
	}
	wantMaps := func(s *specs.Spec) {
		t.Helper()
		if fmt.Sprint(s.Linux.UIDMappings, s.Linux.GIDMappings) != "[{0 100000 65536}] [{0 200000 65536}]" {
			t.Errorf("mappings %v %v", s.Linux.UIDMappings, s.Linux.GIDMappings)
		}
	}
	if got := nsTypes(s.Linux.Namespaces); got != "mount= pid= ipc= network= uts= user=" {
		t.Errorf("sandbox namespaces %s", got)
	}
	wantMaps(s)

	// The container joins the pause process's user namespace, whether it
	// repeats the pod's options (kubelet does) or gives none.
	for _, own := range []*runtime.UserNamespace{pod.Linux.SecurityContext.NamespaceOptions.UsernsOptions, nil} {
		cfg := baseContainer()
		cfg.Linux.SecurityContext.NamespaceOptions = &runtime.NamespaceOption{UsernsOptions: own}
		c, err := Container(cfg, pod, ImageConfig{}, containerParams(t))
		if err != nil {
			t.Fatal(err)
		}
		if got := nsTypes(c.Linux.Namespaces); !strings.HasSuffix(got, " user=/proc/42/ns/user") {
			t.Errorf("container namespaces %s", got)
		}
		wantMaps(c)
	}

	cfg := baseContainer()
	cfg.Linux.SecurityContext.NamespaceOptions = &runtime.NamespaceOption{UsernsOptions: &runtime.UserNamespace{Mode: runtime.NamespaceMode_NODE}}
	_, err = Container(cfg, pod, ImageConfig{}, containerParams(t))
	wantErr(t, err, "mode NODE, but the pod's user namespace is POD (root is host uid 100000)")

	// A pod in the host's user namespace: nothing added, with or without
	// explicit NODE options.
	host := podConfig(false)
	host.Linux.SecurityContext.NamespaceOptions.UsernsOptions = &runtime.UserNamespace{Mode: runtime.NamespaceMode_NODE}
	sp.NetNSPath = "/run/netns/x"
	s, err = Sandbox(host, sp)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(nsTypes(s.Linux.Namespaces), "user") || s.Linux.UIDMappings != nil {
		t.Errorf("host userns: %s %v", nsTypes(s.Linux.Namespaces), s.Linux.UIDMappings)
	}
	host.Linux.SecurityContext.NamespaceOptions.UsernsOptions.Uids = uids
	_, err = Sandbox(host, sp)
	wantErr(t, err, "mode NODE (the host's user namespace) takes no mappings")
}
