// Package specs gives the rest of the project one import for the OCI
// runtime-spec types, so a change of spec version touches one file.
package specs

import ocs "github.com/opencontainers/runtime-spec/specs-go"

type (
	// Spec is a bundle's config.json.
	Spec = ocs.Spec
	// ProcessSpec is the "process" object of a config.json, also used for execs.
	ProcessSpec = ocs.Process
	// User is a process's uid, gid and extra groups.
	User = ocs.User
	// LinuxCapabilities holds the capability sets of a process.
	LinuxCapabilities = ocs.LinuxCapabilities
	// POSIXRlimit is one resource limit.
	POSIXRlimit = ocs.POSIXRlimit
	// Box is a terminal size.
	Box = ocs.Box
	// Root is the bundle's root filesystem.
	Root = ocs.Root
	// Mount is one mount of a container.
	Mount = ocs.Mount
	// Linux holds the Linux-specific parts of a spec.
	Linux = ocs.Linux
	// LinuxResources are cgroup limits, as given to `runc update -r`.
	LinuxResources = ocs.LinuxResources
	// LinuxMemory are memory limits.
	LinuxMemory = ocs.LinuxMemory
	// LinuxCPU are CPU limits.
	LinuxCPU = ocs.LinuxCPU
	// LinuxPids is the pids limit.
	LinuxPids = ocs.LinuxPids
	// LinuxBlockIO are block IO limits.
	LinuxBlockIO = ocs.LinuxBlockIO
	// LinuxThrottleDevice is one block IO rate limit.
	LinuxThrottleDevice = ocs.LinuxThrottleDevice
	// LinuxNamespace is one namespace of a container.
	LinuxNamespace = ocs.LinuxNamespace
	// LinuxDeviceCgroup is one device cgroup rule.
	LinuxDeviceCgroup = ocs.LinuxDeviceCgroup
)

// Version is the runtime-spec version this project writes into config.json files it makes.
var Version = ocs.Version
