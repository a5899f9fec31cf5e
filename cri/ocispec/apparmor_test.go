package ocispec

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// withAppArmor makes the host look as if it had AppArmor, with loads
// counted instead of run.
func withAppArmor(t *testing.T) *int {
	t.Helper()
	oldEnabled, oldEnsure := appArmorEnabled, ensureAppArmor
	t.Cleanup(func() { appArmorEnabled, ensureAppArmor = oldEnabled, oldEnsure })
	loads := 0
	appArmorEnabled = func() bool { return true }
	ensureAppArmor = func() error { loads++; return nil }
	return &loads
}

// TestDefaultAppArmorSpec: on a host with AppArmor, a container or a pod
// that asks for RuntimeDefault, or for nothing, runs under the default
// profile, loaded first; Unconfined, a privileged container and a
// Localhost profile get what they ask.
func TestDefaultAppArmorSpec(t *testing.T) {
	loads := withAppArmor(t)
	for _, tt := range []struct {
		name       string
		prof       *runtime.SecurityProfile
		legacy     string
		privileged bool
		want       string
	}{
		{"unset", nil, "", false, DefaultAppArmorProfile},
		{"RuntimeDefault", &runtime.SecurityProfile{ProfileType: runtime.SecurityProfile_RuntimeDefault}, "", false, DefaultAppArmorProfile},
		{"legacy runtime/default", nil, "runtime/default", false, DefaultAppArmorProfile},
		{"Unconfined", &runtime.SecurityProfile{ProfileType: runtime.SecurityProfile_Unconfined}, "", false, ""},
		{"legacy unconfined", nil, "unconfined", false, ""},
		{"Localhost", &runtime.SecurityProfile{ProfileType: runtime.SecurityProfile_Localhost, LocalhostRef: "mine"}, "", false, "mine"},
		{"privileged", nil, "", true, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := baseContainer()
			sc := cfg.Linux.SecurityContext
			//lint:ignore SA1019 the deprecated name is what older kubelets send
			sc.Apparmor, sc.ApparmorProfile, sc.Privileged = tt.prof, tt.legacy, tt.privileged
			pod := podConfig(false)
			pod.Linux.SecurityContext.Privileged = tt.privileged
			before := *loads
			s, err := Container(cfg, pod, ImageConfig{}, containerParams(t))
			if err != nil {
				t.Fatal(err)
			}
			if s.Process.ApparmorProfile != tt.want {
				t.Fatalf("spec's AppArmor profile %q, want %q", s.Process.ApparmorProfile, tt.want)
			}
			if loaded := *loads > before; loaded != (tt.want == DefaultAppArmorProfile) {
				t.Fatalf("default profile loaded: %v, want %v", loaded, !loaded)
			}
		})
	}
	s, err := Sandbox(podConfig(false), SandboxParams{ID: "sb1", PauseArgs: []string{"/pause"}, RootfsPath: t.TempDir(), NetNSPath: "/run/netns/x"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Process.ApparmorProfile != DefaultAppArmorProfile {
		t.Fatalf("sandbox spec's AppArmor profile %q, want the default", s.Process.ApparmorProfile)
	}
}

// TestAppArmorProfileText: the generated profile is named, attaches to
// disconnected paths (the container's pivoted root), and takes away
// mounts and writes to the kernel's tunables, /proc's memory image and
// sysrq trigger, and the firmware and LSM dirs of /sys.
func TestAppArmorProfileText(t *testing.T) {
	text := appArmorProfileText(DefaultAppArmorProfile)
	for _, want := range []string{
		"#include <tunables/global>\n",
		"\nprofile evjournal-containerd-default flags=(attach_disconnected,mediate_deleted) {\n",
		"  #include <abstractions/base>\n",
		"  signal (send,receive) peer=evjournal-containerd-default,\n",
		"  ptrace (trace,read,tracedby,readby) peer=evjournal-containerd-default,\n",
		"  deny mount,\n",
		"  deny @{PROC}/* w,\n",
		"  deny @{PROC}/[^0-9]*/** w,\n",
		"  deny @{PROC}/kcore rwklx,\n",
		"  deny @{PROC}/sysrq-trigger rwklx,\n",
		"  deny /sys/{[^f],f[^s],fs/[^c],fs/c[^g],fs/cg[^r]}*/** wklx,\n",
		"  deny /sys/firmware/** rwklx,\n",
		"  deny /sys/kernel/security/** rwklx,\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("profile lacks %q:\n%s", want, text)
		}
	}
	if strings.Count(text, "{") != strings.Count(text, "}") || !strings.HasSuffix(text, "}\n") || strings.Contains(text, "@NAME@") {
		t.Errorf("profile is not one whole block:\n%s", text)
	}
}

// TestEnsureDefaultAppArmor: the profile is given to apparmor_parser
// (replace, no cache) only while the kernel does not list it, and a
// parser that fails refuses the container, saying why.
func TestEnsureDefaultAppArmor(t *testing.T) {
	dir := t.TempDir()
	got, profiles := filepath.Join(dir, "stdin"), filepath.Join(dir, "profiles")
	parser := filepath.Join(dir, "apparmor_parser")
	script := "#!/bin/sh\n[ \"$1\" = -Kr ] || exit 3\ncat >>" + got + "\n"
	if err := os.WriteFile(parser, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	oldParser, oldProfiles := appArmorParser, appArmorProfilesFile
	t.Cleanup(func() { appArmorParser, appArmorProfilesFile = oldParser, oldProfiles })
	appArmorParser, appArmorProfilesFile = parser, profiles
	os.WriteFile(profiles, []byte("other (enforce)\n"), 0o644)
	if err := ensureDefaultAppArmor(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(got); string(b) != appArmorProfileText(DefaultAppArmorProfile) {
		t.Fatalf("parser got %q, want the profile", b)
	}
	os.WriteFile(profiles, []byte("other (enforce)\nevjournal-containerd-default (enforce)\n"), 0o644)
	os.Remove(got)
	if err := ensureDefaultAppArmor(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(got); !os.IsNotExist(err) {
		t.Fatalf("the parser ran for a loaded profile (%v)", err)
	}
	os.WriteFile(profiles, nil, 0o644)
	os.WriteFile(parser, []byte("#!/bin/sh\necho 'syntax error, line 3' >&2\nexit 1\n"), 0o755)
	err := ensureDefaultAppArmor()
	if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "syntax error, line 3") {
		t.Fatalf("a failing parser: %v, want FailedPrecondition with its output", err)
	}
	// Where the host has the real parser, it must accept the profile.
	if real, err := exec.LookPath("apparmor_parser"); err == nil {
		cmd := exec.Command(real, "-Q", "-K")
		cmd.Stdin = strings.NewReader(appArmorProfileText(DefaultAppArmorProfile))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("apparmor_parser -Q refuses the profile: %v\n%s", err, out)
		}
	}
}
