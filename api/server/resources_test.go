package server

import (
	"encoding/json"
	"errors"
	"math"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/api/types"
)

// The OCI JSON document is what reaches `runc update -r -`, so compare that.
func TestResourcesFromProto(t *testing.T) {
	dev := &types.BlockIODevice{Major: 8, Minor: 0}
	tests := []struct {
		name string
		in   *types.UpdateResource
		want string
	}{
		{"all zero: nothing changes", &types.UpdateResource{}, `{}`},
		{"memory", &types.UpdateResource{MemoryLimit: 1 << 20, MemoryReservation: 1 << 19},
			`{"memory":{"limit":1048576,"reservation":524288}}`},
		{"unlimited swap as 2^64-1", &types.UpdateResource{MemorySwap: math.MaxUint64},
			`{"memory":{"swap":-1}}`},
		{"cpu", &types.UpdateResource{CpuShares: 512, CpuPeriod: 100000, CpuQuota: 50000, CpusetCpus: "0-1", CpusetMems: "0"},
			`{"cpu":{"shares":512,"quota":50000,"period":100000,"cpus":"0-1","mems":"0"}}`},
		{"unlimited quota", &types.UpdateResource{CpuQuota: math.MaxUint64}, `{"cpu":{"quota":-1}}`},
		{"pids", &types.UpdateResource{PidsLimit: 64}, `{"pids":{"limit":64}}`},
		{"blkio weights", &types.UpdateResource{BlkioWeight: 500, BlkioLeafWeight: 300},
			`{"blockIO":{"weight":500,"leafWeight":300}}`},
		{"blkio devices", &types.UpdateResource{
			BlkioWeightDevice:            []*types.WeightDevice{{BlkIODevice: dev, Weight: 100}},
			BlkioThrottleReadBpsDevice:   []*types.ThrottleDevice{{BlkIODevice: dev, Rate: 1}},
			BlkioThrottleWriteBpsDevice:  []*types.ThrottleDevice{{BlkIODevice: dev, Rate: 2}},
			BlkioThrottleReadIopsDevice:  []*types.ThrottleDevice{{BlkIODevice: dev, Rate: 3}},
			BlkioThrottleWriteIopsDevice: []*types.ThrottleDevice{{BlkIODevice: dev, Rate: 4}},
		}, `{"blockIO":{"weightDevice":[{"major":8,"minor":0,"weight":100}],` +
			`"throttleReadBpsDevice":[{"major":8,"minor":0,"rate":1}],` +
			`"throttleWriteBpsDevice":[{"major":8,"minor":0,"rate":2}],` +
			`"throttleReadIOPSDevice":[{"major":8,"minor":0,"rate":3}],` +
			`"throttleWriteIOPSDevice":[{"major":8,"minor":0,"rate":4}]}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := resourcesFromProto(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(res)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Fatalf("got  %s\nwant %s", b, tt.want)
			}
		})
	}
}

func TestResourcesFromProtoRejects(t *testing.T) {
	tests := []struct {
		name string
		in   *types.UpdateResource
	}{
		{"blkio weight over 16 bits", &types.UpdateResource{BlkioWeight: 70000}},
		{"leaf weight over 16 bits", &types.UpdateResource{BlkioLeafWeight: 70000}},
		{"device weight over 16 bits", &types.UpdateResource{BlkioWeightDevice: []*types.WeightDevice{
			{BlkIODevice: &types.BlockIODevice{Major: 8}, Weight: 70000}}}},
		{"weight device without device", &types.UpdateResource{BlkioWeightDevice: []*types.WeightDevice{{Weight: 10}}}},
		{"throttle without device", &types.UpdateResource{BlkioThrottleReadBpsDevice: []*types.ThrottleDevice{{Rate: 1}}}},
		{"negative device number", &types.UpdateResource{BlkioThrottleReadBpsDevice: []*types.ThrottleDevice{
			{BlkIODevice: &types.BlockIODevice{Major: -1}, Rate: 1}}}},
		{"memory above int64", &types.UpdateResource{MemoryLimit: math.MaxInt64 + 1}},
		{"quota above int64", &types.UpdateResource{CpuQuota: math.MaxUint64 - 1}},
		{"pids above int64", &types.UpdateResource{PidsLimit: math.MaxUint64 - 5}},
		{"kernel memory limit (runc ignores it)", &types.UpdateResource{KernelMemoryLimit: 5}},
		{"kernel TCP limit (runc ignores it)", &types.UpdateResource{MemoryLimit: 1 << 20, KernelTCPMemoryLimit: 6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := resourcesFromProto(tt.in); !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("error %v, want invalid argument", err)
			}
		})
	}
}
