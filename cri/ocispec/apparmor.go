package ocispec

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/internal/errmark"
)

// DefaultAppArmorProfile is the profile a container gets on a host with
// AppArmor when its config asks for RuntimeDefault or for nothing (as
// containerd's and CRI-O's do). It is loaded by the first container that
// needs it, and again if it was unloaded.
const DefaultAppArmorProfile = "evjournal-containerd-default"

// appArmorProfileText is the default profile, in apparmor_parser's
// language. A container may do what its namespaces, capabilities and
// seccomp filter leave it; the profile takes away what they leave
// reachable of the host: mounts, writes to the kernel's tunables in /proc
// and /sys (a process writes only under its own /proc/<pid>, and cgroup
// files), the kernel's memory image, the sysrq trigger and the firmware.
// Signals and ptrace are allowed between processes under this profile and
// from unconfined (host) processes.
func appArmorProfileText(name string) string {
	return strings.ReplaceAll(`#include <tunables/global>

profile @NAME@ flags=(attach_disconnected,mediate_deleted) {
  #include <abstractions/base>

  file,
  network,
  capability,
  umount,
  signal (receive) peer=unconfined,
  signal (send,receive) peer=@NAME@,
  ptrace (trace,read,tracedby,readby) peer=@NAME@,

  # no mounts of its own, whatever its capabilities
  deny mount,

  # /proc: files directly in it, and every dir but a process's
  deny @{PROC}/* w,
  deny @{PROC}/[^0-9]*/** w,
  deny @{PROC}/kcore rwklx,
  deny @{PROC}/sysrq-trigger rwklx,

  # /sys: no writes outside the cgroup file system, no reads of these
  deny /sys/{[^f],f[^s],fs/[^c],fs/c[^g],fs/cg[^r]}*/** wklx,
  deny /sys/firmware/** rwklx,
  deny /sys/kernel/security/** rwklx,
  deny /sys/devices/virtual/powercap/** rwklx,
}
`, "@NAME@", name)
}

// Where the kernel lists the loaded profiles, and the parser that loads
// one (variables for the tests).
var (
	appArmorProfilesFile = "/sys/kernel/security/apparmor/profiles"
	appArmorParser       = "apparmor_parser"
)

// appArmorLoad serializes the loads of the default profile.
var appArmorLoad sync.Mutex

// ensureDefaultAppArmor loads the default profile unless the kernel has
// it. A host with AppArmor that cannot load it refuses the container
// (FailedPrecondition): it would run unconfined where confinement was
// asked for.
func ensureDefaultAppArmor() error {
	appArmorLoad.Lock()
	defer appArmorLoad.Unlock()
	if appArmorLoaded(DefaultAppArmorProfile) {
		return nil
	}
	cmd := exec.Command(appArmorParser, "-Kr") // replace, no cache writes; the profile on stdin
	cmd.Stdin = strings.NewReader(appArmorProfileText(DefaultAppArmorProfile))
	if out, err := cmd.CombinedOutput(); err != nil {
		return errmark.Mark(fmt.Errorf("load the default AppArmor profile %s with %s: %w: %s",
			DefaultAppArmorProfile, appArmorParser, err, bytes.TrimSpace(out)), errdefs.ErrFailedPrecondition)
	}
	return nil
}

// appArmorLoaded says whether the kernel lists a profile of this name.
func appArmorLoaded(name string) bool {
	f, err := os.Open(appArmorProfilesFile)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "name (enforce)"
		if n, _, ok := strings.Cut(sc.Text(), " ("); ok && n == name {
			return true
		}
	}
	return false
}
