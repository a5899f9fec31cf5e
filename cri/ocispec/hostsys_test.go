package ocispec

import (
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func sysMount(t *testing.T, ms []specs.Mount) specs.Mount {
	t.Helper()
	var found []specs.Mount
	for _, m := range ms {
		if m.Destination == "/sys" {
			found = append(found, m)
		}
	}
	if len(found) != 1 {
		t.Fatalf("/sys mounts %v, want one", found)
	}
	return found[0]
}

// TestUserNSHostNetworkSysfs: a pod with a user namespace of its own on the
// host's network gets the host's /sys bound recursively read-only, in its
// sandbox and its containers (a sysfs mount is refused there); with the
// pod's own network, or without a user namespace, /sys is a sysfs.
func TestUserNSHostNetworkSysfs(t *testing.T) {
	m := []*runtime.IDMapping{{ContainerId: 0, HostId: 100000, Length: 65536}}
	for _, c := range []struct {
		name            string
		userns, hostNet bool
		wantBind        bool
	}{
		{"userns, host network", true, true, true},
		{"userns, pod network", true, false, false},
		{"host network", false, true, false},
	} {
		pod := podConfig(c.hostNet)
		if c.userns {
			pod.Linux.SecurityContext.NamespaceOptions.UsernsOptions = &runtime.UserNamespace{Mode: runtime.NamespaceMode_POD, Uids: m, Gids: m}
		}
		sp := SandboxParams{ID: "sb1", PauseArgs: []string{"/pause"}, RootfsPath: t.TempDir()}
		if !c.hostNet && !c.userns {
			sp.NetNSPath = "/run/netns/x"
		}
		s, err := Sandbox(pod, sp)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		cs, err := Container(baseContainer(), pod, ImageConfig{}, containerParams(t))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for what, ms := range map[string][]specs.Mount{"sandbox": s.Mounts, "container": cs.Mounts} {
			got := sysMount(t, ms)
			bind := got.Type == "bind" && got.Source == "/sys" && slices.Equal(got.Options, []string{"rbind", "rro", "nosuid", "nodev", "noexec"})
			if bind != c.wantBind || !bind && got.Type != "sysfs" {
				t.Errorf("%s, %s: /sys %+v, want the host's bound: %v", c.name, what, got, c.wantBind)
			}
		}
	}
}
