package ocispec

import (
	"os"
	"strings"

	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// appArmorEnabled says whether the host runs AppArmor (a variable for
// tests).
var appArmorEnabled = func() bool {
	b, err := os.ReadFile("/sys/module/apparmor/parameters/enabled")
	return err == nil && strings.TrimSpace(string(b)) == "Y"
}

// appArmorProfile returns the profile name to set, if any. On a host with
// AppArmor, RuntimeDefault and unset (typed or legacy) get the default
// profile (DefaultAppArmorProfile, loaded here if the kernel lacks it), as
// containerd and CRI-O give it; Unconfined gets none. A Localhost profile
// is set when the host has AppArmor and is an error otherwise, since the
// pod asked for a confinement it would not get. Without AppArmor only a
// Localhost profile is an error. (A privileged container gets no profile:
// its caller does not ask.)
func appArmorProfile(scope string, prof *runtime.SecurityProfile, legacy string) (string, error) {
	name := ""
	switch {
	case prof != nil && prof.GetProfileType() == runtime.SecurityProfile_Localhost:
		name = prof.GetLocalhostRef()
	case prof == nil && strings.HasPrefix(legacy, "localhost/"):
		name = strings.TrimPrefix(legacy, "localhost/")
	case prof != nil && prof.GetProfileType() == runtime.SecurityProfile_Unconfined, prof == nil && legacy == "unconfined":
		return "", nil
	default: // RuntimeDefault, or nothing asked
		return defaultAppArmor()
	}
	if name == "" {
		return "", fieldErrorf(scope, "apparmor", "a Localhost profile needs a name")
	}
	if !appArmorEnabled() {
		return "", fieldErrorf(scope, "apparmor", "profile %q requested, but AppArmor is not enabled on this host", name)
	}
	return name, nil
}

// defaultAppArmor is the default profile on a host with AppArmor, loaded.
func defaultAppArmor() (string, error) {
	if !appArmorEnabled() {
		return "", nil
	}
	if err := ensureAppArmor(); err != nil {
		return "", err
	}
	return DefaultAppArmorProfile, nil
}

// ensureAppArmor loads the default profile if needed (a variable for
// tests).
var ensureAppArmor = ensureDefaultAppArmor

// selinuxEnabled says whether the host kernel runs SELinux: selinuxfs
// mounted where libselinux looks for it (a variable for tests).
var selinuxEnabled = func() bool {
	_, err := os.Stat("/sys/fs/selinux/enforce")
	return err == nil
}

// checkSELinux decides on a config's SELinux options. This runtime applies
// no labels. On a host without SELinux, as containerd's and CRI-O's CRI do,
// the options are accepted and mean nothing: there is no policy that a label
// would confine by, and kubelet passes the pod's options on as they are
// (Kubernetes' volume specs set `level: s0` on every pod, for hosts that
// have SELinux). On a host with SELinux they are refused, since the pod
// would run unconfined by the context it names.
func checkSELinux(scope string, o *runtime.SELinuxOption) error {
	if o.GetUser() == "" && o.GetRole() == "" && o.GetType() == "" && o.GetLevel() == "" {
		return nil
	}
	if !selinuxEnabled() {
		return nil
	}
	return fieldErrorf(scope, "selinux_options", "SELinux labels are not supported by this runtime (%s:%s:%s:%s)",
		o.GetUser(), o.GetRole(), o.GetType(), o.GetLevel())
}
