package ocispec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Values of the deprecated seccomp_profile_path field.
const (
	legacyRuntimeDefault = "runtime/default"
	legacyDockerDefault  = "docker/default"
	legacyUnconfined     = "unconfined"
	legacyLocalhost      = "localhost/"
)

// seccompFor returns the filter a security context asks for, nil for
// Unconfined. The typed field wins; without it the deprecated path string
// is read ("" is unconfined, as the CRI says). caps is the process's
// bounding set: the default profile and Docker-format profiles allow some
// syscalls only to holders of a capability.
func seccompFor(scope string, prof *runtime.SecurityProfile, legacy string, caps []string) (*specs.LinuxSeccomp, error) {
	if prof == nil {
		prof = legacySeccomp(legacy)
		if prof == nil {
			return nil, nil
		}
	}
	switch prof.GetProfileType() {
	case runtime.SecurityProfile_Unconfined:
		return nil, nil
	case runtime.SecurityProfile_RuntimeDefault:
		return DefaultSeccomp(caps), nil
	case runtime.SecurityProfile_Localhost:
		s, err := LoadSeccomp(prof.GetLocalhostRef(), caps)
		if err != nil {
			return nil, fieldError(scope, "seccomp localhost_ref", err)
		}
		return s, nil
	}
	return nil, fieldErrorf(scope, "seccomp", "unknown profile type %d", prof.GetProfileType())
}

// legacySeccomp reads seccomp_profile_path; nil means unconfined.
func legacySeccomp(p string) *runtime.SecurityProfile {
	switch {
	case p == legacyRuntimeDefault || p == legacyDockerDefault:
		return &runtime.SecurityProfile{ProfileType: runtime.SecurityProfile_RuntimeDefault}
	case strings.HasPrefix(p, legacyLocalhost):
		return &runtime.SecurityProfile{ProfileType: runtime.SecurityProfile_Localhost,
			LocalhostRef: strings.TrimPrefix(p, legacyLocalhost)}
	case p == "" || p == legacyUnconfined:
		return nil
	}
	// Anything else is a path kubelet did not mean; treat it as localhost,
	// which fails clearly if there is no such file.
	return &runtime.SecurityProfile{ProfileType: runtime.SecurityProfile_Localhost, LocalhostRef: p}
}

// profileFile is the union of the two formats a Localhost profile comes in:
// the OCI LinuxSeccomp object, and Docker's profile (what kubelet users
// ship, from Docker's or the security-profiles-operator's examples), which
// adds archMap, a syscall's old single "name", and per-rule includes and
// excludes on architecture, capabilities and kernel version.
type profileFile struct {
	DefaultAction    specs.LinuxSeccompAction `json:"defaultAction"`
	DefaultErrnoRet  *uint                    `json:"defaultErrnoRet,omitempty"`
	Architectures    []specs.Arch             `json:"architectures,omitempty"`
	ArchMap          []archMapEntry           `json:"archMap,omitempty"`
	Flags            []specs.LinuxSeccompFlag `json:"flags,omitempty"`
	ListenerPath     string                   `json:"listenerPath,omitempty"`
	ListenerMetadata string                   `json:"listenerMetadata,omitempty"`
	Syscalls         []profileRule            `json:"syscalls,omitempty"`
}

type archMapEntry struct {
	Arch specs.Arch   `json:"architecture"`
	Subs []specs.Arch `json:"subArchitectures"`
}

type profileRule struct {
	specs.LinuxSyscall
	Name     string      `json:"name,omitempty"`
	Includes *ruleFilter `json:"includes,omitempty"`
	Excludes *ruleFilter `json:"excludes,omitempty"`
}

// ruleFilter is a Docker rule condition: architectures by Go-ish name
// ("amd64", "arm64"), capabilities, and a minimum kernel ("4.8").
type ruleFilter struct {
	Arches    []string `json:"arches,omitempty"`
	Caps      []string `json:"caps,omitempty"`
	MinKernel string   `json:"minKernel,omitempty"`
}

// LoadSeccomp reads a Localhost profile at an absolute host path, in OCI
// or Docker format, and returns it as an OCI filter for a process with the
// bounding capabilities caps.
func LoadSeccomp(path string, caps []string) (*specs.LinuxSeccomp, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("profile path %q is not absolute", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var pf profileFile
	if err := dec.Decode(&pf); err != nil {
		return nil, fmt.Errorf("profile %s: %w", path, err)
	}
	s, err := pf.toOCI(caps, kernelVersion())
	if err != nil {
		return nil, fmt.Errorf("profile %s: %w", path, err)
	}
	return s, nil
}

func (pf *profileFile) toOCI(caps []string, kernel [2]int) (*specs.LinuxSeccomp, error) {
	if pf.DefaultAction == "" {
		return nil, errors.New("no defaultAction")
	}
	s := &specs.LinuxSeccomp{
		DefaultAction:    pf.DefaultAction,
		DefaultErrnoRet:  pf.DefaultErrnoRet,
		Architectures:    pf.Architectures,
		Flags:            pf.Flags,
		ListenerPath:     pf.ListenerPath,
		ListenerMetadata: pf.ListenerMetadata,
	}
	if len(pf.ArchMap) > 0 && len(s.Architectures) == 0 {
		for _, e := range pf.ArchMap {
			if slices.Contains(nativeArches(), e.Arch) {
				s.Architectures = append(s.Architectures, e.Arch)
				s.Architectures = append(s.Architectures, e.Subs...)
			}
		}
	}
	for i, r := range pf.Syscalls {
		if !r.applies(caps, kernel) {
			continue
		}
		sc := r.LinuxSyscall
		if r.Name != "" && !slices.Contains(sc.Names, r.Name) {
			sc.Names = append(sc.Names, r.Name)
		}
		if len(sc.Names) == 0 || sc.Action == "" {
			return nil, fmt.Errorf("syscalls[%d]: a rule needs names and an action", i)
		}
		s.Syscalls = append(s.Syscalls, sc)
	}
	return s, nil
}

// applies evaluates a Docker rule's conditions: every included capability
// held, no excluded one, the arch included and not excluded, the kernel at
// least the minimum.
func (r *profileRule) applies(caps []string, kernel [2]int) bool {
	arch := goruntime.GOARCH
	if in := r.Includes; in != nil {
		if len(in.Arches) > 0 && !slices.Contains(in.Arches, arch) {
			return false
		}
		for _, c := range in.Caps {
			if !slices.Contains(caps, c) {
				return false
			}
		}
		if in.MinKernel != "" && kernelLess(kernel, parseKernel(in.MinKernel)) {
			return false
		}
	}
	if ex := r.Excludes; ex != nil {
		if slices.Contains(ex.Arches, arch) {
			return false
		}
		if slices.ContainsFunc(ex.Caps, func(c string) bool { return slices.Contains(caps, c) }) {
			return false
		}
		if ex.MinKernel != "" && !kernelLess(kernel, parseKernel(ex.MinKernel)) {
			return false
		}
	}
	return true
}

// nativeArches are the seccomp architectures of this machine's processes:
// the native one and those its kernel also runs (32-bit x86 on x86-64).
func nativeArches() []specs.Arch {
	switch goruntime.GOARCH {
	case "amd64":
		return []specs.Arch{specs.ArchX86_64, specs.ArchX86, specs.ArchX32}
	case "arm64":
		return []specs.Arch{specs.ArchAARCH64, specs.ArchARM}
	case "386":
		return []specs.Arch{specs.ArchX86}
	case "arm":
		return []specs.Arch{specs.ArchARM}
	case "ppc64le":
		return []specs.Arch{specs.ArchPPC64LE}
	case "s390x":
		return []specs.Arch{specs.ArchS390X, specs.ArchS390}
	case "riscv64":
		return []specs.Arch{specs.ArchRISCV64}
	}
	return nil
}
