package main

import (
	"context"
	"math"
	"strconv"

	"github.com/evjournal/containerd/api/types"
	"github.com/urfave/cli/v2"
)

// updateFlags are the numeric resource flags of `containers update` and the
// UpdateResource field each sets. All are strings parsed with base
// auto-detection (0x.., 0o.., 0b.., decimal), as v0.2.9 did; "-1" means
// unlimited where the kernel has such a value.
var updateFlags = []struct {
	name  string
	usage string
	set   func(*types.UpdateResource, uint64)
}{
	{"memory-limit", "memory limit (bytes)", func(r *types.UpdateResource, v uint64) { r.MemoryLimit = v }},
	{"memory-reservation", "soft memory limit (bytes)", func(r *types.UpdateResource, v uint64) { r.MemoryReservation = v }},
	{"memory-swap", "memory plus swap limit (bytes, -1: unlimited)", func(r *types.UpdateResource, v uint64) { r.MemorySwap = v }},
	{"cpu-shares", "CPU shares (relative weight)", func(r *types.UpdateResource, v uint64) { r.CpuShares = v }},
	{"cpu-quota", "CFS quota (µs, -1: unlimited)", func(r *types.UpdateResource, v uint64) { r.CpuQuota = v }},
	{"cpu-period", "CFS period (µs)", func(r *types.UpdateResource, v uint64) { r.CpuPeriod = v }},
	{"kernel-limit", "kernel memory limit (bytes; refused: runc ignores it)", func(r *types.UpdateResource, v uint64) { r.KernelMemoryLimit = v }},
	{"kernel-tcp-limit", "kernel TCP buffer limit (bytes; refused: runc ignores it)", func(r *types.UpdateResource, v uint64) { r.KernelTCPMemoryLimit = v }},
	{"blkio-weight", "block IO weight (10-1000)", func(r *types.UpdateResource, v uint64) { r.BlkioWeight = v }},
	{"pids-limit", "maximum number of tasks (-1: unlimited)", func(r *types.UpdateResource, v uint64) { r.PidsLimit = v }},
}

func updateCommand() *cli.Command {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "cpuset-cpus", Usage: "CPUs the container may use (e.g. 0-3,5)"},
		&cli.StringFlag{Name: "cpuset-mems", Usage: "memory nodes the container may use"},
	}
	for _, f := range updateFlags {
		flags = append(flags, &cli.StringFlag{Name: f.name, Usage: f.usage})
	}
	return &cli.Command{
		Name:      "update",
		Usage:     "update a container's resource constraints",
		ArgsUsage: "ID",
		Flags:     flags,
		Action: func(c *cli.Context) error {
			id, err := singleID(c)
			if err != nil {
				return err
			}
			res, err := updateResources(c.String)
			if err != nil {
				return err
			}
			return withClient(c, func(cl *client) error {
				_, err := cl.UpdateContainer(context.Background(), &types.UpdateContainerRequest{Id: id, Pid: "init", Resources: res})
				return err
			})
		},
	}
}

// updateResources builds the request from the flag values (get returns ""
// for a flag that was not given, which leaves the resource unchanged).
func updateResources(get func(string) string) (*types.UpdateResource, error) {
	r := &types.UpdateResource{CpusetCpus: get("cpuset-cpus"), CpusetMems: get("cpuset-mems")}
	for _, f := range updateFlags {
		s := get(f.name)
		if s == "" {
			continue
		}
		v, err := parseLimit(s)
		if err != nil {
			return nil, missing("--%s %q: %v", f.name, s, err)
		}
		f.set(r, v)
	}
	return r, nil
}

// parseLimit parses a number with base auto-detection; -1 becomes 2^64-1,
// the wire encoding of "unlimited" (the daemon turns it back into -1).
func parseLimit(s string) (uint64, error) {
	if v, err := parseUint(s); err == nil {
		return v, nil
	}
	v, err := strconv.ParseInt(s, 0, 64)
	if err != nil {
		return 0, errNotANumber
	}
	if v != -1 {
		return 0, errNegative
	}
	return math.MaxUint64, nil
}

func parseUint(s string) (uint64, error) { return strconv.ParseUint(s, 0, 64) }

type constError string

func (e constError) Error() string { return string(e) }

const (
	errNotANumber = constError("not a number")
	errNegative   = constError("negative values other than -1 are not allowed")
)
