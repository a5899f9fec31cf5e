package server

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/evjournal/containerd/api"
	"github.com/evjournal/containerd/api/types"
	runc "github.com/containerd/go-runc"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// clockTicks is USER_HZ, the unit of /proc/stat. It is 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// Stats samples a container's cgroup statistics (compat doc 3.11).
func (s *Server) Stats(ctx context.Context, r *types.StatsRequest) (*types.StatsResponse, error) {
	now := time.Now()
	st, err := s.sup.Stats(ctx, r.GetId())
	if err != nil {
		return nil, api.ToGRPC(err)
	}
	rs, limits := runcStats(st)
	resp := statsToProto(rs, limits)
	resp.Timestamp = timestamppb.New(now)
	if sys, err := systemUsage(s.procStat); err != nil {
		s.log.WithError(err).Warn("stats: no system_usage")
	} else {
		resp.CgroupStats.CpuStats.SystemUsage = sys
	}
	return resp, nil
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

// systemUsage returns the host's CPU time in ns: the first seven numbers of
// the `cpu` line of /proc/stat (user, nice, system, idle, iowait, irq,
// softirq), summed, converted from clock ticks (compat doc 2.3, CpuStats).
func systemUsage(procStat string) (uint64, error) {
	f, err := os.Open(procStat)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "cpu" {
			continue
		}
		return sumTicks(fields[1:])
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no cpu line", procStat)
}

func sumTicks(fields []string) (uint64, error) {
	if len(fields) < 7 {
		return 0, fmt.Errorf("/proc/stat cpu line: %d fields, want at least 7", len(fields))
	}
	var ticks uint64
	for _, f := range fields[:7] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat cpu line: %w", err)
		}
		ticks += v
	}
	return ticks * (uint64(time.Second) / clockTicks), nil
}
