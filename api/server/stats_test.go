package server

import (
	"testing"
	"time"

	runc "github.com/containerd/go-runc"
	"github.com/evjournal/containerd/runtime"
)

func TestStatsToProto(t *testing.T) {
	st := &runc.Stats{
		Cpu: runc.Cpu{
			Usage:      runc.CpuUsage{Total: 100, Percpu: []uint64{60, 40}, Kernel: 30, User: 70},
			Throttling: runc.Throttling{Periods: 5, ThrottledPeriods: 2, ThrottledTime: 9},
		},
		Memory: runc.Memory{
			Cache:  11,
			Usage:  runc.MemoryEntry{Usage: 1, Max: 2, Failcnt: 3, Limit: 4},
			Swap:   runc.MemoryEntry{Usage: 5, Max: 6, Failcnt: 7, Limit: 8},
			Kernel: runc.MemoryEntry{Usage: 9, Max: 10},
			Raw:    map[string]uint64{"rss": 12},
		},
		Pids:              runc.Pids{Current: 3, Limit: 10},
		Blkio:             runc.Blkio{IoServiceBytesRecursive: []runc.BlkioEntry{{Major: 8, Op: "Read", Value: 4096}}, SectorsRecursive: []runc.BlkioEntry{{Value: 1}}},
		Hugetlb:           map[string]runc.Hugetlb{"2MB": {Usage: 1, Max: 2, Failcnt: 3}},
		NetworkInterfaces: []*runc.NetworkInterface{{Name: "eth0", RxBytes: 1, RxPackets: 2, TxDropped: 3}, nil},
	}
	resp := statsToProto(st, map[string]uint64{"2MB": 4})
	cg := resp.GetCgroupStats()
	cpu := cg.GetCpuStats()
	if cpu.GetCpuUsage().GetTotalUsage() != 100 || len(cpu.GetCpuUsage().GetPercpuUsage()) != 2 ||
		cpu.GetCpuUsage().GetUsageInKernelmode() != 30 || cpu.GetCpuUsage().GetUsageInUsermode() != 70 ||
		cpu.GetThrottlingData().GetThrottledTime() != 9 {
		t.Errorf("cpu %v", cpu)
	}
	mem := cg.GetMemoryStats()
	if mem.GetCache() != 11 || mem.GetUsage().GetLimit() != 4 || mem.GetSwapUsage().GetMaxUsage() != 6 ||
		mem.GetKernelUsage().GetMaxUsage() != 10 || mem.GetStats()["rss"] != 12 {
		t.Errorf("memory %v", mem)
	}
	if cg.GetPidsStats().GetCurrent() != 3 || cg.GetPidsStats().GetLimit() != 10 {
		t.Errorf("pids %v", cg.GetPidsStats())
	}
	b := cg.GetBlkioStats()
	if e := b.GetIoServiceBytesRecursive(); len(e) != 1 || e[0].GetOp() != "Read" || e[0].GetValue() != 4096 || len(b.GetSectorsRecursive()) != 1 {
		t.Errorf("blkio %v", b)
	}
	if h := cg.GetHugetlbStats()["2MB"]; h.GetUsage() != 1 || h.GetMaxUsage() != 2 || h.GetFailcnt() != 3 || h.GetLimit() != 4 {
		t.Errorf("hugetlb %v", h)
	}
	if n := resp.GetNetworkStats(); len(n) != 1 || n[0].GetName() != "eth0" || n[0].GetRx_Packets() != 2 || n[0].GetTxDropped() != 3 {
		t.Errorf("network %v", n)
	}
	if empty := statsToProto(nil, nil); empty.GetCgroupStats().GetCpuStats() == nil {
		t.Error("cpu_stats must always be present")
	}
}

func TestRuntimeStatsToProto(t *testing.T) {
	when := time.Date(2024, 1, 2, 3, 4, 5, 6, time.UTC)
	resp := runtimeStatsToProto(&runtime.Stats{
		Stats:       runc.Stats{Pids: runc.Pids{Current: 2}},
		SystemUsage: 123, Timestamp: when,
	})
	if resp.GetCgroupStats().GetCpuStats().GetSystemUsage() != 123 || !resp.GetTimestamp().AsTime().Equal(when) ||
		resp.GetCgroupStats().GetPidsStats().GetCurrent() != 2 {
		t.Fatalf("stats %v", resp)
	}
	if resp := runtimeStatsToProto(&runtime.Stats{}); resp.GetTimestamp() == nil {
		t.Fatal("the timestamp must always be present")
	}
}
