package e2e

import (
	"os"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// withSeccomp sets a container's seccomp profile.
func withSeccomp(kind runtimeapi.SecurityProfile_ProfileType) func(*runtimeapi.ContainerConfig) {
	return func(c *runtimeapi.ContainerConfig) {
		c.Linux.SecurityContext = &runtimeapi.LinuxContainerSecurityContext{Seccomp: &runtimeapi.SecurityProfile{ProfileType: kind}}
	}
}

// TestCRISecurityDefaults: under RuntimeDefault a container cannot open a
// socket of the kernel's crypto API (AF_ALG) or a VM socket (AF_VSOCK),
// as under containerd's default; other families work. Unconfined, the
// filter does not refuse them (the kernel may: EAFNOSUPPORT without the
// vsock module). Before, RuntimeDefault allowed both.
func TestCRISecurityDefaults(t *testing.T) {
	t.Parallel()
	e := newCRIEnv(t)
	ref := e.pushTestinit(t, "e2e/security:1")
	podCfg, podID, confined := runSleeper(t, e, "confined", ref, withSeccomp(runtimeapi.SecurityProfile_RuntimeDefault))
	unconfined := addSleeper(t, e, podCfg, podID, "unconfined", withSeccomp(runtimeapi.SecurityProfile_Unconfined))
	for _, c := range []struct {
		cid, syscall string
		denied       bool
	}{
		{confined, "socket-alg", true}, {confined, "socket-vsock", true}, {confined, "socket-inet", false},
		{unconfined, "socket-alg", false}, {unconfined, "socket-vsock", false},
	} {
		ex, err := execSync(t, e, c.cid, "syscall "+c.syscall)
		if err != nil || ex.ExitCode != 0 {
			t.Fatalf("syscall %s: %v %v", c.syscall, ex, err)
		}
		got := strings.TrimSpace(string(ex.Stdout))
		if denied := strings.HasSuffix(got, ": operation not permitted"); denied != c.denied {
			t.Errorf("%s in the %s container: %q, want it denied by the filter: %v", c.syscall, map[bool]string{true: "RuntimeDefault", false: "unconfined"}[c.cid == confined], got, c.denied)
		}
	}
	removePod(t, e, podID)
}

// TestCRIAppArmorDefault: on a host with AppArmor, a container that asks
// for RuntimeDefault, or for nothing, runs under the default profile
// (loaded by the daemon); Unconfined runs unconfined. A host without
// AppArmor cannot run this; TestDefaultAppArmorSpec and
// TestAppArmorProfileText (cri/ocispec) check the spec and the profile.
func TestCRIAppArmorDefault(t *testing.T) {
	if b, err := os.ReadFile("/sys/module/apparmor/parameters/enabled"); err != nil || strings.TrimSpace(string(b)) != "Y" {
		t.Skipf("AppArmor is not enabled on this host (/sys/module/apparmor/parameters/enabled: %q, %v): no profile can be applied here", b, err)
	}
	t.Parallel()
	e := newCRIEnv(t)
	ref := e.pushTestinit(t, "e2e/apparmor:1")
	for _, c := range []struct {
		name string
		bend func(*runtimeapi.ContainerConfig)
		want string
	}{
		{"unset", nil, "evjournal-containerd-default (enforce)"},
		{"runtime-default", func(c *runtimeapi.ContainerConfig) {
			c.Linux.SecurityContext = &runtimeapi.LinuxContainerSecurityContext{Apparmor: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}}
		}, "evjournal-containerd-default (enforce)"},
		{"unconfined", func(c *runtimeapi.ContainerConfig) {
			c.Linux.SecurityContext = &runtimeapi.LinuxContainerSecurityContext{Apparmor: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}}
		}, "unconfined"},
	} {
		_, podID, cid := runSleeper(t, e, "aa-"+c.name, ref, c.bend)
		ex, err := execSync(t, e, cid, "file /proc/self/attr/current")
		if got := strings.TrimPrefix(strings.TrimSpace(string(ex.GetStdout())), "file /proc/self/attr/current: "); err != nil || got != c.want {
			t.Errorf("%s: the exec's AppArmor label %q (%v), want %q", c.name, got, err, c.want)
		}
		removePod(t, e, podID)
	}
}
