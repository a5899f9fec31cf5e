package server

import (
	"fmt"
	"math"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/specs"
	ocs "github.com/opencontainers/runtime-spec/specs-go"
)

// resourcesFromProto converts UpdateResource into the OCI document given to
// `runc update -r` (docs/api.md 3.3). A 0 or empty field means "leave
// unchanged", so it stays nil and runc does not touch it; a group with
// nothing set stays nil as a whole. Unlike v0.2.9, the blkio fields 12-17
// are honoured (docs/api.md 9.2) and out-of-range values are
// rejected instead of truncated.
//
// The signed limits (memory, swap, CPU quota, pids) arrive as uint64 and are
// cast the way v0.2.9 did: clients encode "unlimited" (-1) as 2^64-1, which
// becomes -1 again. Any other value above MaxInt64 is rejected.
func resourcesFromProto(r *types.UpdateResource) (*specs.LinuxResources, error) {
	var res specs.LinuxResources
	var err error
	if res.BlockIO, err = blockIOFromProto(r); err != nil {
		return nil, err
	}
	if res.CPU, err = cpuFromProto(r); err != nil {
		return nil, err
	}
	if res.Memory, err = memoryFromProto(r); err != nil {
		return nil, err
	}
	if r.GetPidsLimit() != 0 {
		limit, err := signed("pidsLimit", r.GetPidsLimit())
		if err != nil {
			return nil, err
		}
		res.Pids = &specs.LinuxPids{Limit: limit}
	}
	return &res, nil
}

func cpuFromProto(r *types.UpdateResource) (*specs.LinuxCPU, error) {
	cpu := specs.LinuxCPU{
		Shares: unsigned(r.GetCpuShares()),
		Period: unsigned(r.GetCpuPeriod()),
		Cpus:   r.GetCpusetCpus(),
		Mems:   r.GetCpusetMems(),
	}
	var err error
	if cpu.Quota, err = signed("cpuQuota", r.GetCpuQuota()); err != nil {
		return nil, err
	}
	if cpu == (specs.LinuxCPU{}) {
		return nil, nil
	}
	return &cpu, nil
}

func memoryFromProto(r *types.UpdateResource) (*specs.LinuxMemory, error) {
	var mem specs.LinuxMemory
	fields := []struct {
		name string
		v    uint64
		dst  **int64
	}{
		{"memoryLimit", r.GetMemoryLimit(), &mem.Limit},
		{"memorySwap", r.GetMemorySwap(), &mem.Swap},
		{"memoryReservation", r.GetMemoryReservation(), &mem.Reservation},
	}
	if err := noKernelLimits(r); err != nil {
		return nil, err
	}
	set := false
	for _, f := range fields {
		p, err := signed(f.name, f.v)
		if err != nil {
			return nil, err
		}
		*f.dst, set = p, set || p != nil
	}
	if !set {
		return nil, nil
	}
	return &mem, nil
}

// noKernelLimits rejects the kernel memory limits of the v0.2 wire API:
// runc >= 1.2 ignores them with a warning (cgroup v2 has none), so a client
// asking for one must hear that it will not be applied.
func noKernelLimits(r *types.UpdateResource) error {
	for _, f := range []struct {
		name string
		v    uint64
	}{{"kernelMemoryLimit", r.GetKernelMemoryLimit()}, {"kernelTCPMemoryLimit", r.GetKernelTCPMemoryLimit()}} {
		if f.v != 0 {
			return fmt.Errorf("%s %d: kernel memory limits are not supported (runc ignores them): %w", f.name, f.v, errdefs.ErrInvalidArgument)
		}
	}
	return nil
}

func blockIOFromProto(r *types.UpdateResource) (*specs.LinuxBlockIO, error) {
	var b specs.LinuxBlockIO
	var err error
	if b.Weight, err = weight("blkioWeight", r.GetBlkioWeight()); err != nil {
		return nil, err
	}
	if b.LeafWeight, err = weight("blkioLeafWeight", r.GetBlkioLeafWeight()); err != nil {
		return nil, err
	}
	if b.WeightDevice, err = weightDevices(r.GetBlkioWeightDevice()); err != nil {
		return nil, err
	}
	throttles := []struct {
		name string
		in   []*types.ThrottleDevice
		dst  *[]ocs.LinuxThrottleDevice
	}{
		{"blkioThrottleReadBpsDevice", r.GetBlkioThrottleReadBpsDevice(), &b.ThrottleReadBpsDevice},
		{"blkioThrottleWriteBpsDevice", r.GetBlkioThrottleWriteBpsDevice(), &b.ThrottleWriteBpsDevice},
		{"blkioThrottleReadIopsDevice", r.GetBlkioThrottleReadIopsDevice(), &b.ThrottleReadIOPSDevice},
		{"blkioThrottleWriteIopsDevice", r.GetBlkioThrottleWriteIopsDevice(), &b.ThrottleWriteIOPSDevice},
	}
	for _, t := range throttles {
		if *t.dst, err = throttleDevices(t.name, t.in); err != nil {
			return nil, err
		}
	}
	if b.Weight == nil && b.LeafWeight == nil && b.WeightDevice == nil &&
		b.ThrottleReadBpsDevice == nil && b.ThrottleWriteBpsDevice == nil &&
		b.ThrottleReadIOPSDevice == nil && b.ThrottleWriteIOPSDevice == nil {
		return nil, nil
	}
	return &b, nil
}

func weightDevices(in []*types.WeightDevice) ([]ocs.LinuxWeightDevice, error) {
	var out []ocs.LinuxWeightDevice
	for i, d := range in {
		name := fmt.Sprintf("blkioWeightDevice[%d]", i)
		dev, err := blockDevice(name, d.GetBlkIODevice())
		if err != nil {
			return nil, err
		}
		w := ocs.LinuxWeightDevice{LinuxBlockIODevice: dev}
		if w.Weight, err = weight(name+".weight", uint64(d.GetWeight())); err != nil {
			return nil, err
		}
		if w.LeafWeight, err = weight(name+".leafWeight", uint64(d.GetLeafWeight())); err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}

func throttleDevices(field string, in []*types.ThrottleDevice) ([]ocs.LinuxThrottleDevice, error) {
	var out []ocs.LinuxThrottleDevice
	for i, d := range in {
		dev, err := blockDevice(fmt.Sprintf("%s[%d]", field, i), d.GetBlkIODevice())
		if err != nil {
			return nil, err
		}
		out = append(out, ocs.LinuxThrottleDevice{LinuxBlockIODevice: dev, Rate: d.GetRate()})
	}
	return out, nil
}

// blockDevice requires the device to be named: a rule without a device
// cannot be applied, and silently dropping it would hide the mistake.
func blockDevice(field string, d *types.BlockIODevice) (ocs.LinuxBlockIODevice, error) {
	if d == nil {
		return ocs.LinuxBlockIODevice{}, fmt.Errorf("%s: blkIODevice is missing: %w", field, errdefs.ErrInvalidArgument)
	}
	if d.GetMajor() < 0 || d.GetMinor() < 0 {
		return ocs.LinuxBlockIODevice{}, fmt.Errorf("%s: negative device number %d:%d: %w",
			field, d.GetMajor(), d.GetMinor(), errdefs.ErrInvalidArgument)
	}
	return ocs.LinuxBlockIODevice{Major: d.GetMajor(), Minor: d.GetMinor()}, nil
}

// unsigned returns nil for 0 ("unchanged"), else a pointer to v.
func unsigned(v uint64) *uint64 {
	if v == 0 {
		return nil
	}
	return &v
}

// signed returns nil for 0, -1 for 2^64-1 (the uint64 encoding of
// "unlimited"), v for values that fit an int64, and an error otherwise.
func signed(field string, v uint64) (*int64, error) {
	switch {
	case v == 0:
		return nil, nil
	case v == math.MaxUint64:
		s := int64(-1)
		return &s, nil
	case v > math.MaxInt64:
		return nil, fmt.Errorf("%s %d is out of range: %w", field, v, errdefs.ErrInvalidArgument)
	}
	s := int64(v)
	return &s, nil
}

// weight returns nil for 0 and rejects values that do not fit the uint16 of
// the OCI spec (v0.2.9 truncated them silently).
func weight(field string, v uint64) (*uint16, error) {
	if v == 0 {
		return nil, nil
	}
	if v > math.MaxUint16 {
		return nil, fmt.Errorf("%s %d is out of range (max %d): %w", field, v, math.MaxUint16, errdefs.ErrInvalidArgument)
	}
	w := uint16(v)
	return &w, nil
}
