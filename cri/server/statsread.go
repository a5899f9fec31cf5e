package server

import (
	"errors"
	"path"
	"path/filepath"
	"sync"
	"time"

	"github.com/evjournal/containerd/supervisor/objects"
	"github.com/opencontainers/cgroups"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// statsState is what the stats calls keep between calls: the cgroup
// reader, each object's cgroupsPath, the writable layers' usage, and each
// object's last CPU sample (for usage_nano_cores).
type statsState struct {
	cg     cgroupReader
	paths  cgroupPaths
	layers *layerCache
	rates  cpuRates
	// netDev reads a process's network namespace's interface counters.
	netDev func(pid int) ([]ifaceCounters, error)
}

func newStatsState(images ImageStore) *statsState {
	return &statsState{cg: newHostCgroups(), layers: newLayerCache(images), netDev: procNetDev}
}

// statsWorkers bounds the cgroups one list call reads at once: each read
// is a few dozen small file reads, CPU-bound; more workers than cores only
// queue.
const statsWorkers = 4

// parallel runs f(0..n-1) on up to statsWorkers goroutines.
func parallel(n int, f func(i int)) {
	workers := min(n, statsWorkers)
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// containerCgroups are the controllers a container's stats read (IO: its
// pressure, on v2 only).
const containerCgroups = cgroups.CPU | cgroups.Memory | cgroups.Pids | cgroups.IO

// podCgroups are those of a pod's own cgroup.
const podCgroups = cgroups.CPU | cgroups.Memory | cgroups.IO

// containerStats is one container's stats: its attributes and writable
// layer always; CPU, memory and swap from its cgroup while it runs (o is
// its object as the loop reported it). The sample is returned too (nil
// when none was read), for the pod's sums.
//
// The writable layer's walk is waited for until deadline at most.
func (s *Server) containerStats(c *container, o objects.Object, deadline time.Time) (*runtimeapi.ContainerStats, *cgroupSample) {
	id := c.rec.ID
	out := &runtimeapi.ContainerStats{Attributes: &runtimeapi.ContainerAttributes{
		Id: id, Metadata: c.cfg.GetMetadata(), Labels: c.cfg.GetLabels(), Annotations: c.cfg.GetAnnotations()}}
	out.WritableLayer = s.writableLayer(id, deadline)
	if o.State != objects.Running {
		s.stats.rates.forget(id)
		if o.State == objects.Exited { // its cgroup is gone for good
			s.stats.paths.forget(id)
		}
		return out, nil
	}
	smp, ok := s.readObject(id, filepath.Join(s.containerDir(id), "bundle"), containerCgroups)
	if !ok {
		return out, nil
	}
	out.Cpu = s.cpuUsage(id, smp)
	out.Memory = memoryUsage(smp)
	out.Swap = swapUsage(smp)
	out.Io = ioUsage(smp)
	return out, &smp
}

// readObject reads the cgroup of a running object, whose bundle names it.
// A failure is logged and reported as no sample: a container that has just
// exited has no cgroup any more.
func (s *Server) readObject(id, bundle string, want cgroups.Controller) (cgroupSample, bool) {
	p, err := s.stats.paths.get(id, bundle)
	if err == nil {
		var smp cgroupSample
		if smp, err = s.stats.cg.read(p, want); err == nil {
			return smp, true
		}
	}
	l := s.log.WithError(err).WithField("id", id)
	if errors.Is(err, errCgroupGone) {
		s.stats.paths.forget(id)
		l.Info("stats: the cgroup is gone (the process exited?): reported without usage")
	} else {
		l.Warn("stats: cannot read the cgroup: reported without usage")
	}
	return cgroupSample{}, false
}

// podStats is a pod's stats: its attributes and its containers' stats
// always; while its pause runs, also CPU and memory of the pod's cgroup
// (cgroup_parent, which holds the pause and every container; without a
// parent, the sum of the pause's and the running containers' cgroups), the
// network counters of its namespace (not for a host-network pod), and the
// count of its containers' processes (the pause not counted, as
// containerd and kubelet count them).
func (s *Server) podStats(sb *sandbox, objs map[string]objects.Object, deadline time.Time) *runtimeapi.PodSandboxStats {
	id := sb.rec.ID
	linux := &runtimeapi.LinuxPodSandboxStats{}
	out := &runtimeapi.PodSandboxStats{Linux: linux, Attributes: &runtimeapi.PodSandboxAttributes{
		Id: id, Metadata: sb.cfg.GetMetadata(), Labels: sb.cfg.GetLabels(), Annotations: sb.cfg.GetAnnotations()}}
	var samples []cgroupSample
	var procs uint64
	for _, c := range s.recs.containersOf(id) {
		st, smp := s.containerStats(c, objs[c.rec.ID], deadline)
		linux.Containers = append(linux.Containers, st)
		if smp != nil {
			samples = append(samples, *smp)
			procs += smp.PidsStats.Current
		}
	}
	o := objs[id]
	if o.State != objects.Running {
		s.stats.rates.forget(id)
		return out
	}
	now := time.Now()
	if parent := sb.cfg.GetLinux().GetCgroupParent(); parent != "" {
		if smp, err := s.stats.cg.read(path.Join("/", parent), podCgroups); err == nil {
			linux.Cpu, linux.Memory, linux.Io = s.cpuUsage(id, smp), memoryUsage(smp), ioUsage(smp)
		} else {
			s.log.WithError(err).WithField("pod", id).Warn("stats: cannot read the pod's cgroup: reported without usage")
		}
	} else if pause, ok := s.readObject(id, filepath.Join(s.sandboxDir(id), "bundle"), cgroups.CPU|cgroups.Memory); ok {
		linux.Cpu, linux.Memory = s.summedUsage(id, append(samples, pause))
	}
	linux.Process = &runtimeapi.ProcessUsage{Timestamp: now.UnixNano(), ProcessCount: &runtimeapi.UInt64Value{Value: procs}}
	if sb.cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() != runtimeapi.NamespaceMode_NODE && o.Pid > 0 {
		ifs, err := s.stats.netDev(o.Pid)
		if err != nil {
			s.log.WithError(err).WithField("pod", id).Warn("stats: cannot read the pod's network counters")
		} else {
			linux.Network = networkUsage(now, ifs)
		}
	}
	return out
}

// cpuUsage is a sample's CPU usage; usage_nano_cores comes from the
// object's previous sample (none at the first).
func (s *Server) cpuUsage(id string, smp cgroupSample) *runtimeapi.CpuUsage {
	total := smp.CpuStats.CpuUsage.TotalUsage
	out := &runtimeapi.CpuUsage{Timestamp: smp.At.UnixNano(), UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: total},
		Psi: psiStats(smp.CpuStats.PSI)}
	if n, ok := s.stats.rates.update(id, total, smp.At); ok {
		out.UsageNanoCores = &runtimeapi.UInt64Value{Value: n}
	}
	return out
}

// summedUsage adds up samples of cgroups side by side (a pod without a
// cgroup of its own).
func (s *Server) summedUsage(id string, smps []cgroupSample) (*runtimeapi.CpuUsage, *runtimeapi.MemoryUsage) {
	var sum cgroupSample
	sum.Stats = cgroups.NewStats()
	var ws, rss, faults, majors uint64
	for _, smp := range smps {
		sum.CpuStats.CpuUsage.TotalUsage += smp.CpuStats.CpuUsage.TotalUsage
		sum.MemoryStats.Usage.Usage += smp.MemoryStats.Usage.Usage
		ws += workingSet(smp)
		rss += memStat(smp, "total_rss", "anon")
		faults += memStat(smp, "total_pgfault", "pgfault")
		majors += memStat(smp, "total_pgmajfault", "pgmajfault")
		if smp.At.After(sum.At) {
			sum.At = smp.At
		}
	}
	mem := &runtimeapi.MemoryUsage{Timestamp: sum.At.UnixNano(),
		WorkingSetBytes: &runtimeapi.UInt64Value{Value: ws}, UsageBytes: &runtimeapi.UInt64Value{Value: sum.MemoryStats.Usage.Usage},
		RssBytes: &runtimeapi.UInt64Value{Value: rss}, PageFaults: &runtimeapi.UInt64Value{Value: faults},
		MajorPageFaults: &runtimeapi.UInt64Value{Value: majors}}
	return s.cpuUsage(id, sum), mem
}

// memStat is memory.stat's v1 key (hierarchical totals) or v2 key.
func memStat(smp cgroupSample, v1, v2 string) uint64 {
	if smp.V2 {
		return smp.MemoryStats.Stats[v2]
	}
	return smp.MemoryStats.Stats[v1]
}

// workingSet is the usage less the inactive file cache, as kubelet and
// cAdvisor compute it for eviction.
func workingSet(smp cgroupSample) uint64 {
	usage, inactive := smp.MemoryStats.Usage.Usage, memStat(smp, "total_inactive_file", "inactive_file")
	if inactive < usage {
		return usage - inactive
	}
	return 0
}

// unlimited: a limit this large is none (v1 writes 2^63 rounded to pages,
// v2's "max" reads as the largest uint64).
func unlimited(v uint64) bool { return v == 0 || v > 1<<62 }

func memoryUsage(smp cgroupSample) *runtimeapi.MemoryUsage {
	ws := workingSet(smp)
	out := &runtimeapi.MemoryUsage{Timestamp: smp.At.UnixNano(),
		WorkingSetBytes: &runtimeapi.UInt64Value{Value: ws}, UsageBytes: &runtimeapi.UInt64Value{Value: smp.MemoryStats.Usage.Usage},
		RssBytes:        &runtimeapi.UInt64Value{Value: memStat(smp, "total_rss", "anon")},
		PageFaults:      &runtimeapi.UInt64Value{Value: memStat(smp, "total_pgfault", "pgfault")},
		MajorPageFaults: &runtimeapi.UInt64Value{Value: memStat(smp, "total_pgmajfault", "pgmajfault")},
		Psi:             psiStats(smp.MemoryStats.PSI)}
	if limit := smp.MemoryStats.Usage.Limit; !unlimited(limit) {
		avail := uint64(0)
		if limit > ws {
			avail = limit - ws
		}
		out.AvailableBytes = &runtimeapi.UInt64Value{Value: avail}
	}
	return out
}

// psiStats is the CRI's form of a v2 pressure file (nil: none, as on
// v1); totals in ns (the kernel's are µs).
func psiStats(p *cgroups.PSIStats) *runtimeapi.PsiStats {
	if p == nil {
		return nil
	}
	d := func(x cgroups.PSIData) *runtimeapi.PsiData {
		return &runtimeapi.PsiData{Total: x.Total * 1000, Avg10: x.Avg10, Avg60: x.Avg60, Avg300: x.Avg300}
	}
	return &runtimeapi.PsiStats{Some: d(p.Some), Full: d(p.Full)}
}

// ioUsage is the IO pressure of a v2 cgroup; nil without one.
func ioUsage(smp cgroupSample) *runtimeapi.IoUsage {
	if smp.BlkioStats.PSI == nil {
		return nil
	}
	return &runtimeapi.IoUsage{Timestamp: smp.At.UnixNano(), Psi: psiStats(smp.BlkioStats.PSI)}
}

// swapBytes is the cgroup's swap use and its swap limit (0: none). v1
// counts memory+swap (memory.memsw.*, absent without swap accounting: no
// figure); v2 swap alone (memory.swap.*).
func swapBytes(smp cgroupSample) (usage, limit uint64, ok bool) {
	m := smp.MemoryStats
	if smp.V2 {
		return m.SwapOnlyUsage.Usage, m.SwapOnlyUsage.Limit, true
	}
	if m.SwapUsage.Limit == 0 { // no memory.memsw.limit_in_bytes: no swap accounting
		return 0, 0, false
	}
	if m.SwapUsage.Usage > m.Usage.Usage {
		usage = m.SwapUsage.Usage - m.Usage.Usage
	}
	if !unlimited(m.SwapUsage.Limit) && !unlimited(m.Usage.Limit) && m.SwapUsage.Limit > m.Usage.Limit {
		limit = m.SwapUsage.Limit - m.Usage.Limit
	}
	return usage, limit, true
}

func swapUsage(smp cgroupSample) *runtimeapi.SwapUsage {
	usage, limit, ok := swapBytes(smp)
	if !ok {
		return nil
	}
	out := &runtimeapi.SwapUsage{Timestamp: smp.At.UnixNano(), SwapUsageBytes: &runtimeapi.UInt64Value{Value: usage}}
	if !unlimited(limit) {
		avail := uint64(0)
		if limit > usage {
			avail = limit - usage
		}
		out.SwapAvailableBytes = &runtimeapi.UInt64Value{Value: avail}
	}
	return out
}

// cpuRates keeps each object's last CPU sample, from which the next gives
// usage_nano_cores (containerd's CRI plugin reports it so; kubelet uses it
// when given).
type cpuRates struct {
	mu   sync.Mutex
	last map[string]cpuPoint
}

type cpuPoint struct {
	usage uint64
	at    time.Time
}

func (r *cpuRates) update(id string, usage uint64, at time.Time) (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil || len(r.last) >= maxCachedCgroups {
		r.last = map[string]cpuPoint{}
	}
	prev, ok := r.last[id]
	r.last[id] = cpuPoint{usage, at}
	d := at.Sub(prev.at)
	if !ok || d <= 0 || usage < prev.usage {
		return 0, false
	}
	return uint64(float64(usage-prev.usage) / d.Seconds()), true
}

func (r *cpuRates) forget(id string) {
	r.mu.Lock()
	delete(r.last, id)
	r.mu.Unlock()
}
