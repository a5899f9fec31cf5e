package server

import (
	"context"
	"time"

	runc "github.com/containerd/go-runc"
	"github.com/evjournal/containerd/api"
	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/runtime"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Stats samples a container's cgroup statistics (docs/api.md 3.11). The
// runtime adds system_usage (from /proc/stat) and the sample's time.
func (s *Server) Stats(ctx context.Context, r *types.StatsRequest) (*types.StatsResponse, error) {
	st, err := s.sup.Stats(ctx, r.GetId())
	if err != nil {
		return nil, api.ToGRPC(err)
	}
	return runtimeStatsToProto(st), nil
}

// runtimeStatsToProto converts the runtime's sample. A sample without a
// time gets the time of the reply (the timestamp is always present).
func runtimeStatsToProto(st *runtime.Stats) *types.StatsResponse {
	if st == nil {
		st = &runtime.Stats{}
	}
	resp := statsToProto(&st.Stats, nil)
	resp.CgroupStats.CpuStats.SystemUsage = st.SystemUsage
	when := st.Timestamp
	if when.IsZero() {
		when = time.Now()
	}
	resp.Timestamp = timestamppb.New(when)
	return resp
}

// statsToProto converts runc's statistics. hugetlbLimits, keyed by page size
// like st.Hugetlb, fills HugetlbStats.limit (never filled by v0.2.9).
// Network interfaces, when the runtime reports them, fill network_stats.
// cgroup_stats and its cpu_stats are always present.
func statsToProto(st *runc.Stats, hugetlbLimits map[string]uint64) *types.StatsResponse {
	if st == nil {
		st = &runc.Stats{}
	}
	cg := &types.CgroupStats{
		CpuStats:    cpuStatsToProto(st.Cpu),
		MemoryStats: memoryStatsToProto(st.Memory),
		BlkioStats:  blkioStatsToProto(st.Blkio),
		PidsStats:   &types.PidsStats{Current: st.Pids.Current, Limit: st.Pids.Limit},
	}
	if len(st.Hugetlb) > 0 {
		cg.HugetlbStats = make(map[string]*types.HugetlbStats, len(st.Hugetlb))
		for size, h := range st.Hugetlb {
			cg.HugetlbStats[size] = &types.HugetlbStats{
				Usage: h.Usage, MaxUsage: h.Max, Failcnt: h.Failcnt, Limit: hugetlbLimits[size],
			}
		}
	}
	resp := &types.StatsResponse{CgroupStats: cg}
	for _, n := range st.NetworkInterfaces {
		if n != nil {
			resp.NetworkStats = append(resp.NetworkStats, networkToProto(n))
		}
	}
	return resp
}

func cpuStatsToProto(c runc.Cpu) *types.CpuStats {
	return &types.CpuStats{
		CpuUsage: &types.CpuUsage{
			TotalUsage:        c.Usage.Total,
			PercpuUsage:       c.Usage.Percpu,
			UsageInKernelmode: c.Usage.Kernel,
			UsageInUsermode:   c.Usage.User,
		},
		ThrottlingData: &types.ThrottlingData{
			Periods:          c.Throttling.Periods,
			ThrottledPeriods: c.Throttling.ThrottledPeriods,
			ThrottledTime:    c.Throttling.ThrottledTime,
		},
	}
}

func memoryStatsToProto(m runc.Memory) *types.MemoryStats {
	return &types.MemoryStats{
		Cache:       m.Cache,
		Usage:       memoryDataToProto(m.Usage),
		SwapUsage:   memoryDataToProto(m.Swap),
		KernelUsage: memoryDataToProto(m.Kernel),
		Stats:       m.Raw,
	}
}

func memoryDataToProto(e runc.MemoryEntry) *types.MemoryData {
	return &types.MemoryData{Usage: e.Usage, MaxUsage: e.Max, Failcnt: e.Failcnt, Limit: e.Limit}
}

func blkioStatsToProto(b runc.Blkio) *types.BlkioStats {
	return &types.BlkioStats{
		IoServiceBytesRecursive: blkioEntries(b.IoServiceBytesRecursive),
		IoServicedRecursive:     blkioEntries(b.IoServicedRecursive),
		IoQueuedRecursive:       blkioEntries(b.IoQueuedRecursive),
		IoServiceTimeRecursive:  blkioEntries(b.IoServiceTimeRecursive),
		IoWaitTimeRecursive:     blkioEntries(b.IoWaitTimeRecursive),
		IoMergedRecursive:       blkioEntries(b.IoMergedRecursive),
		IoTimeRecursive:         blkioEntries(b.IoTimeRecursive),
		SectorsRecursive:        blkioEntries(b.SectorsRecursive),
	}
}

func blkioEntries(in []runc.BlkioEntry) []*types.BlkioStatsEntry {
	var out []*types.BlkioStatsEntry
	for _, e := range in {
		out = append(out, &types.BlkioStatsEntry{Major: e.Major, Minor: e.Minor, Op: e.Op, Value: e.Value})
	}
	return out
}

func networkToProto(n *runc.NetworkInterface) *types.NetworkStats {
	return &types.NetworkStats{
		Name:       n.Name,
		RxBytes:    n.RxBytes,
		Rx_Packets: n.RxPackets,
		RxErrors:   n.RxErrors,
		RxDropped:  n.RxDropped,
		TxBytes:    n.TxBytes,
		TxPackets:  n.TxPackets,
		TxErrors:   n.TxErrors,
		TxDropped:  n.TxDropped,
	}
}
