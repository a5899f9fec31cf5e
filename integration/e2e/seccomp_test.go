package e2e

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	ocs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/integration/fixture"
)

// TestSeccompProfile: a bundle's seccomp profile is applied to the
// container. The profile makes mkdir fail with EXDEV, an errno mkdir of a
// fresh path on a tmpfs never gives by itself, so the init's report names
// the filter as the cause; the same init without the profile makes the dir.
func TestSeccompProfile(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(fixture.Runc(t), "--version").CombinedOutput()
	// runc 1.0.0-rc2 names no libseccomp in its version (the Makefile
	// builds it with the seccomp tag), and its spec has no errnoRet: a
	// denied call fails with EPERM.
	denied := syscall.EXDEV
	if fixture.OldRuntime() {
		denied = syscall.EPERM
	} else if err != nil || !strings.Contains(string(out), "libseccomp:") {
		t.Fatalf("runc --version (%v) does not name libseccomp, so it was built without seccomp:\n%s", err, out)
	}
	d := startDaemon(t)
	cases := map[string]struct {
		profile *ocs.LinuxSeccomp
		want    string
	}{
		"denied":     {denyMkdir(denied), "mkdir /tmp/d: " + denied.Error() + "\n"},
		"no-profile": {nil, "mkdir /tmp/d: ok\n"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := fixture.NewBundle(t, fixture.Args("mkdir", "/tmp/d", "--", "sleep", "forever"))
			b.Spec.Linux.Seccomp = c.profile
			b.Write(t)
			id := fixture.UniqueID(t)
			stdout, outFifo := fifo(t, t.TempDir(), "stdout")
			evs := d.SubscribeAfter(time.Now(), id)
			createReq(t, d, &types.CreateContainerRequest{Id: id, BundlePath: b.Path, Stdout: stdout})
			evs.Expect("start-container " + id)
			if got := readUntil(t, outFifo, "\n"); got != c.want {
				t.Errorf("init printed %q, want %q", got, c.want)
			}
			signal(t, d, id, "init", syscall.SIGKILL)
			evs.Expect("exit " + id + " init 137")
		})
	}
}

// denyMkdir is a profile allowing every syscall but mkdir and mkdirat,
// which fail with errno.
func denyMkdir(errno syscall.Errno) *ocs.LinuxSeccomp {
	ret := uint(errno)
	return &ocs.LinuxSeccomp{
		DefaultAction: ocs.ActAllow,
		Architectures: []ocs.Arch{ocs.ArchX86_64, ocs.ArchX86, ocs.ArchAARCH64},
		Syscalls: []ocs.LinuxSyscall{{
			Names: []string{"mkdir", "mkdirat"}, Action: ocs.ActErrno, ErrnoRet: &ret,
		}},
	}
}
