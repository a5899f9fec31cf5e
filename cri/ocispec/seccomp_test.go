package ocispec

import (
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// allowedNames are the syscalls a profile allows without conditions.
func allowedNames(s *specs.LinuxSeccomp) []string {
	var names []string
	for _, r := range s.Syscalls {
		if r.Action == specs.ActAllow && len(r.Args) == 0 {
			names = append(names, r.Names...)
		}
	}
	return names
}

func TestDefaultSeccomp(t *testing.T) {
	tests := []struct {
		name            string
		caps            []string
		kernel          [2]int
		allowed, denied []string
	}{
		{"no caps", nil, [2]int{6, 1},
			[]string{"read", "execve", "ptrace", "socketpair", "uretprobe"},
			[]string{"mount", "umount2", "keyctl", "add_key", "request_key", "reboot", "kexec_load", "init_module",
				"bpf", "perf_event_open", "clock_settime", "swapon", "unshare", "setns", "io_uring_setup", "chroot",
				"socket", // allowed for some address families only (TestDefaultSeccompSocket)
				"get_mempolicy", "olduname", "oldolduname", "signal", "sigaction", "sigpending", "sigsuspend"}},
		{"sys_nice", []string{"CAP_SYS_NICE"}, [2]int{6, 1}, []string{"get_mempolicy", "mbind"}, nil},
		{"sys_admin", []string{"CAP_SYS_ADMIN"}, [2]int{6, 1},
			[]string{"mount", "umount2", "unshare", "setns", "clone", "clone3", "bpf"},
			[]string{"keyctl", "kexec_load", "swapon", "reboot"}},
		{"default caps", DefaultCaps, [2]int{6, 1}, []string{"chroot", "ptrace"}, []string{"mount", "clock_settime"}},
		{"sys_time and boot", []string{"CAP_SYS_TIME", "CAP_SYS_BOOT"}, [2]int{6, 1}, []string{"clock_settime", "reboot"}, nil},
		{"old kernel ptrace", nil, [2]int{4, 4}, nil, []string{"ptrace"}},
		{"old kernel ptrace with the cap", []string{"CAP_SYS_PTRACE"}, [2]int{4, 4}, []string{"ptrace"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := defaultSeccomp(tt.caps, tt.kernel)
			if s.DefaultAction != specs.ActErrno || s.DefaultErrnoRet == nil || *s.DefaultErrnoRet != 1 {
				t.Fatalf("default action %s %v, want EPERM", s.DefaultAction, s.DefaultErrnoRet)
			}
			allowed := allowedNames(s)
			for _, n := range tt.allowed {
				if !slices.Contains(allowed, n) {
					t.Errorf("%s not allowed", n)
				}
			}
			for _, n := range tt.denied {
				if slices.Contains(allowed, n) {
					t.Errorf("%s allowed", n)
				}
			}
		})
	}
}

// TestDefaultSeccompConditional: without CAP_SYS_ADMIN, clone and unshare
// are allowed only without CLONE_NEW* flags, clone3 gets ENOSYS, and
// personality only with the usual values.
func TestDefaultSeccompConditional(t *testing.T) {
	s := defaultSeccomp(nil, [2]int{6, 1})
	var cloneRule, clone3Rule *specs.LinuxSyscall
	var personalities []uint64
	for i, r := range s.Syscalls {
		switch {
		case slices.Contains(r.Names, "unshare"):
			cloneRule = &s.Syscalls[i]
		case slices.Contains(r.Names, "clone3"):
			clone3Rule = &s.Syscalls[i]
		case slices.Equal(r.Names, []string{"personality"}):
			personalities = append(personalities, r.Args[0].Value)
		}
	}
	if cloneRule == nil || !slices.Contains(cloneRule.Names, "clone") || cloneRule.Args[0].Op != specs.OpMaskedEqual ||
		cloneRule.Args[0].Value != namespaceFlags || cloneRule.Args[0].ValueTwo != 0 {
		t.Errorf("clone/unshare rule %+v", cloneRule)
	}
	if clone3Rule == nil || clone3Rule.Action != specs.ActErrno || *clone3Rule.ErrnoRet != 38 {
		t.Errorf("clone3 rule %+v", clone3Rule)
	}
	if !slices.Equal(personalities, []uint64{0, 8, 0x20000, 0x20008, 0xffffffff}) {
		t.Errorf("personalities %x", personalities)
	}
}

func TestLocalhostProfiles(t *testing.T) {
	dir := t.TempDir()
	oci := filepath.Join(dir, "oci.json")
	os.WriteFile(oci, []byte(`{"defaultAction":"SCMP_ACT_ERRNO","architectures":["SCMP_ARCH_X86_64"],
		"syscalls":[{"names":["read","write"],"action":"SCMP_ACT_ALLOW"}]}`), 0o644)
	docker := filepath.Join(dir, "docker.json")
	os.WriteFile(docker, []byte(`{
		"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 1,
		"archMap": [
			{"architecture": "SCMP_ARCH_X86_64", "subArchitectures": ["SCMP_ARCH_X86", "SCMP_ARCH_X32"]},
			{"architecture": "SCMP_ARCH_AARCH64", "subArchitectures": ["SCMP_ARCH_ARM"]}],
		"syscalls": [
			{"names": ["read"], "action": "SCMP_ACT_ALLOW", "comment": "always"},
			{"name": "write", "action": "SCMP_ACT_ALLOW"},
			{"names": ["mount"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_ADMIN"]}},
			{"names": ["ptrace"], "action": "SCMP_ACT_ALLOW", "includes": {"minKernel": "4.8"}},
			{"names": ["futuristic"], "action": "SCMP_ACT_ALLOW", "includes": {"minKernel": "99.0"}},
			{"names": ["chroot"], "action": "SCMP_ACT_ALLOW", "excludes": {"caps": ["CAP_SYS_ADMIN"]}},
			{"names": ["nowhere"], "action": "SCMP_ACT_ALLOW", "includes": {"arches": ["mips"]}}
		]}`), 0o644)
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"syscalls":[]}`), 0o644)

	s, err := LoadSeccomp(oci, nil)
	if err != nil || !slices.Equal(allowedNames(s), []string{"read", "write"}) || len(s.Architectures) != 1 {
		t.Fatalf("oci profile %+v, %v", s, err)
	}
	s, err = LoadSeccomp(docker, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := allowedNames(s); !slices.Equal(got, []string{"read", "write", "ptrace", "chroot"}) {
		t.Errorf("docker profile without caps allows %v", got)
	}
	if goruntime.GOARCH == "amd64" && !slices.Equal(s.Architectures, nativeArches()) {
		t.Errorf("architectures %v", s.Architectures)
	}
	s, _ = LoadSeccomp(docker, []string{"CAP_SYS_ADMIN"})
	if got := allowedNames(s); !slices.Equal(got, []string{"read", "write", "mount", "ptrace"}) {
		t.Errorf("docker profile with CAP_SYS_ADMIN allows %v", got)
	}
	for _, tt := range []struct{ path, want string }{
		{bad, "no defaultAction"},
		{filepath.Join(dir, "missing.json"), "no such file"},
		{"relative.json", "not absolute"},
	} {
		_, err := seccompFor(containerScope, &runtime.SecurityProfile{ProfileType: runtime.SecurityProfile_Localhost, LocalhostRef: tt.path}, "", nil)
		wantErr(t, err, "container config: seccomp localhost_ref: ")
		wantErr(t, err, tt.want)
	}
}

func TestSeccompSelection(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "p.json")
	os.WriteFile(prof, []byte(`{"defaultAction":"SCMP_ACT_LOG"}`), 0o644)
	tests := []struct {
		name   string
		prof   *runtime.SecurityProfile
		legacy string
		want   string // "" for unconfined, else the default action
	}{
		{"unset is unconfined", nil, "", ""},
		{"legacy unconfined", nil, "unconfined", ""},
		{"legacy runtime/default", nil, "runtime/default", string(specs.ActErrno)},
		{"legacy docker/default", nil, "docker/default", string(specs.ActErrno)},
		{"legacy localhost", nil, "localhost/" + prof, string(specs.ActLog)},
		{"typed wins over legacy", &runtime.SecurityProfile{ProfileType: runtime.SecurityProfile_Unconfined}, "runtime/default", ""},
		{"typed default", &runtime.SecurityProfile{}, "", string(specs.ActErrno)},
		{"typed localhost", &runtime.SecurityProfile{ProfileType: runtime.SecurityProfile_Localhost, LocalhostRef: prof}, "", string(specs.ActLog)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := seccompFor(containerScope, tt.prof, tt.legacy, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if s != nil {
				got = string(s.DefaultAction)
			}
			if got != tt.want {
				t.Fatalf("profile %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseKernel(t *testing.T) {
	for in, want := range map[string][2]int{"6.1.0-18-amd64": {6, 1}, "4.8": {4, 8}, "5.15.0+": {5, 15}, "": {0, 0}, "6.18.44-fc-v657": {6, 18}} {
		if got := parseKernel(in); got != want {
			t.Errorf("parseKernel(%q) = %v, want %v", in, got, want)
		}
	}
}
