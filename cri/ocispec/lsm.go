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

// checkSELinux refuses SELinux options: this runtime applies no labels
// (the host kernel has no SELinux), and a pod that names a context expects
// to be confined by it.
func checkSELinux(scope string, o *runtime.SELinuxOption) error {
	if o.GetUser() == "" && o.GetRole() == "" && o.GetType() == "" && o.GetLevel() == "" {
		return nil
	}
	return fieldErrorf(scope, "selinux_options", "SELinux labels are not supported by this runtime (%s:%s:%s:%s)",
		o.GetUser(), o.GetRole(), o.GetType(), o.GetLevel())
}
