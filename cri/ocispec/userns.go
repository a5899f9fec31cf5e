package ocispec

import (
	"fmt"
	"strconv"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// UserNS is a pod's user namespace: the one range of host uids and the one
// of host gids that container ids 0..Size-1 map to, as kubelet allocates
// them (hostUsers: false). The pause process makes the namespace; the
// containers join it. nil is the host's user namespace.
type UserNS struct {
	UID, GID specs.LinuxIDMapping
}

// HostRootUID and HostRootGID are the host ids of the container's root:
// the owner the runtime gives the files it makes for the pod (the rootfs's
// upper dir), so that root in the pod owns them.
func (u *UserNS) HostRootUID() uint32 { return u.UID.HostID }
func (u *UserNS) HostRootGID() uint32 { return u.GID.HostID }

// PodUserNS reads the sandbox's userns_options: nil for NODE (or none
// given, as from kubelets before user namespaces), the mappings for POD.
// Only what kubelet sends is accepted: one uid and one gid mapping that
// start at container id 0. CONTAINER and TARGET have no meaning for a user
// namespace.
func PodUserNS(cfg *runtime.PodSandboxConfig) (*UserNS, error) {
	const field = "namespace_options.userns_options"
	u := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions()
	if u == nil {
		// POD is the enum's zero value: only options that are there ask.
		return nil, nil
	}
	switch u.GetMode() {
	case runtime.NamespaceMode_NODE:
		if len(u.GetUids()) > 0 || len(u.GetGids()) > 0 {
			return nil, fieldErrorf(sandboxScope, field, "mode NODE (the host's user namespace) takes no mappings")
		}
		return nil, nil
	case runtime.NamespaceMode_POD:
	default:
		return nil, fieldErrorf(sandboxScope, field, "mode %s: a pod's user namespace is NODE or POD", u.GetMode())
	}
	uid, err := oneMapping(field+".uids", u.GetUids())
	if err != nil {
		return nil, err
	}
	gid, err := oneMapping(field+".gids", u.GetGids())
	if err != nil {
		return nil, err
	}
	return &UserNS{UID: uid, GID: gid}, nil
}

func oneMapping(field string, ms []*runtime.IDMapping) (specs.LinuxIDMapping, error) {
	var none specs.LinuxIDMapping
	if len(ms) != 1 {
		return none, fieldErrorf(sandboxScope, field, "%d mappings: exactly one is supported", len(ms))
	}
	m := ms[0]
	switch {
	case m.GetContainerId() != 0:
		return none, fieldErrorf(sandboxScope, field, "the mapping starts at container id %d: container id 0 (root) must be mapped", m.GetContainerId())
	case m.GetLength() == 0:
		return none, fieldErrorf(sandboxScope, field, "the mapping has length 0")
	case uint64(m.GetHostId())+uint64(m.GetLength()) > 1<<32:
		return none, fieldErrorf(sandboxScope, field, "host ids %d+%d go past 2^32", m.GetHostId(), m.GetLength())
	}
	return specs.LinuxIDMapping{ContainerID: 0, HostID: m.GetHostId(), Size: m.GetLength()}, nil
}

// apply gives spec the namespace (new, or joined at path) and its
// mappings (runc checks a joined namespace's against them).
func (u *UserNS) apply(l *specs.Linux, path string) {
	if u == nil {
		return
	}
	l.Namespaces = append(l.Namespaces, specs.LinuxNamespace{Type: specs.UserNamespace, Path: path})
	l.UIDMappings = []specs.LinuxIDMapping{u.UID}
	l.GIDMappings = []specs.LinuxIDMapping{u.GID}
}

// containerUserNS checks that a container asks for its pod's user
// namespace (kubelet repeats the pod's options) and returns it.
func containerUserNS(sandbox *runtime.PodSandboxConfig, sc *runtime.LinuxContainerSecurityContext) (*UserNS, error) {
	pod, err := PodUserNS(sandbox)
	if err != nil {
		return nil, err
	}
	own := sc.GetNamespaceOptions().GetUsernsOptions()
	if own != nil && (own.GetMode() == runtime.NamespaceMode_POD) != (pod != nil) {
		return nil, fieldErrorf(containerScope, "namespace_options.userns_options",
			"mode %s, but the pod's user namespace is %s: a container shares its pod's", own.GetMode(), podUserNSMode(pod))
	}
	return pod, nil
}

func podUserNSMode(u *UserNS) string {
	if u == nil {
		return runtime.NamespaceMode_NODE.String()
	}
	return fmt.Sprintf("%s (root is host uid %s)", runtime.NamespaceMode_POD, strconv.FormatUint(uint64(u.UID.HostID), 10))
}
