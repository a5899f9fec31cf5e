package server

import (
	"context"
	"fmt"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/supervisor"
	"github.com/evjournal/containerd/supervisor/objects"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ContainerStats reads a running container's cgroup counters through the
// supervisor (`runc events --stats`); a container that does not run has
// its attributes only.
func (s *Server) ContainerStats(ctx context.Context, r *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	c, err := s.recs.container(r.GetContainerId())
	if err != nil {
		return nil, toStatus(err)
	}
	st, err := s.containerStats(ctx, c)
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.ContainerStatsResponse{Stats: st}, nil
}

func (s *Server) containerStats(ctx context.Context, c *container) (*runtimeapi.ContainerStats, error) {
	id := c.rec.ID
	out := &runtimeapi.ContainerStats{Attributes: &runtimeapi.ContainerAttributes{
		Id: id, Metadata: c.cfg.GetMetadata(), Labels: c.cfg.GetLabels(), Annotations: c.cfg.GetAnnotations()}}
	if o, err := s.objectOf(ctx, id); err != nil || o.State != objects.Running {
		return out, nil
	}
	st, err := s.sup.Stats(ctx, id)
	if errdefs.IsNotFound(err) {
		return out, nil // it exited meanwhile
	}
	if err != nil {
		return nil, fmt.Errorf("container %s: stats: %w", id, err)
	}
	out.Cpu, out.Memory = cpuStats(st), memoryStats(st)
	return out, nil
}

func cpuStats(st *runtime.Stats) *runtimeapi.CpuUsage {
	return &runtimeapi.CpuUsage{Timestamp: st.Timestamp.UnixNano(), UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: st.Cpu.Usage.Total}}
}

// memoryStats: the working set is the usage less the inactive file cache,
// as kubelet computes it for eviction.
func memoryStats(st *runtime.Stats) *runtimeapi.MemoryUsage {
	usage := st.Memory.Usage.Usage
	inactive := st.Memory.Raw["total_inactive_file"]
	if v, ok := st.Memory.Raw["inactive_file"]; ok && inactive == 0 {
		inactive = v
	}
	ws := usage
	if inactive < ws {
		ws -= inactive
	} else {
		ws = 0
	}
	rss := st.Memory.Raw["total_rss"]
	if rss == 0 {
		rss = st.Memory.Raw["anon"]
	}
	return &runtimeapi.MemoryUsage{Timestamp: st.Timestamp.UnixNano(),
		WorkingSetBytes: &runtimeapi.UInt64Value{Value: ws}, UsageBytes: &runtimeapi.UInt64Value{Value: usage},
		RssBytes: &runtimeapi.UInt64Value{Value: rss}, PageFaults: &runtimeapi.UInt64Value{Value: st.Memory.Raw["pgfault"]},
		MajorPageFaults: &runtimeapi.UInt64Value{Value: st.Memory.Raw["pgmajfault"]}}
}

func (s *Server) ListContainerStats(ctx context.Context, r *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	f := r.GetFilter()
	var cs []*container
	for _, c := range s.recs.allContainers() {
		if c.matches(f.GetId(), f.GetPodSandboxId(), f.GetLabelSelector()) {
			cs = append(cs, c)
		}
	}
	out := &runtimeapi.ListContainerStatsResponse{}
	for _, c := range cs {
		st, err := s.containerStats(ctx, c)
		if err != nil {
			return nil, toStatus(err)
		}
		out.Stats = append(out.Stats, st)
	}
	return out, nil
}

// PodSandboxStats sums the pod's running containers' CPU and memory, and
// lists their stats.
func (s *Server) PodSandboxStats(ctx context.Context, r *runtimeapi.PodSandboxStatsRequest) (*runtimeapi.PodSandboxStatsResponse, error) {
	sb, err := s.recs.sandbox(r.GetPodSandboxId())
	if err != nil {
		return nil, toStatus(err)
	}
	st, err := s.podStats(ctx, sb)
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.PodSandboxStatsResponse{Stats: st}, nil
}

func (s *Server) podStats(ctx context.Context, sb *sandbox) (*runtimeapi.PodSandboxStats, error) {
	attrs := &runtimeapi.PodSandboxAttributes{Id: sb.rec.ID, Metadata: sb.cfg.GetMetadata(), Labels: sb.cfg.GetLabels(), Annotations: sb.cfg.GetAnnotations()}
	linux := &runtimeapi.LinuxPodSandboxStats{}
	var cpu, mem, ws uint64
	var ts int64
	for _, c := range s.recs.containersOf(sb.rec.ID) {
		st, err := s.containerStats(ctx, c)
		if err != nil {
			return nil, err
		}
		linux.Containers = append(linux.Containers, st)
		if st.Cpu != nil {
			cpu += st.Cpu.UsageCoreNanoSeconds.GetValue()
			ts = st.Cpu.Timestamp
		}
		if st.Memory != nil {
			mem += st.Memory.UsageBytes.GetValue()
			ws += st.Memory.WorkingSetBytes.GetValue()
		}
	}
	if ts != 0 {
		linux.Cpu = &runtimeapi.CpuUsage{Timestamp: ts, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: cpu}}
		linux.Memory = &runtimeapi.MemoryUsage{Timestamp: ts, UsageBytes: &runtimeapi.UInt64Value{Value: mem}, WorkingSetBytes: &runtimeapi.UInt64Value{Value: ws}}
	}
	return &runtimeapi.PodSandboxStats{Attributes: attrs, Linux: linux}, nil
}

func (s *Server) ListPodSandboxStats(ctx context.Context, r *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	f := r.GetFilter()
	var sbs []*sandbox
	for _, sb := range s.recs.allSandboxes() {
		if sb.matches(f.GetId(), f.GetLabelSelector()) {
			sbs = append(sbs, sb)
		}
	}
	out := &runtimeapi.ListPodSandboxStatsResponse{}
	for _, sb := range sbs {
		st, err := s.podStats(ctx, sb)
		if err != nil {
			return nil, toStatus(err)
		}
		out.Stats = append(out.Stats, st)
	}
	return out, nil
}

// UpdateContainerResources changes a running container's cgroup limits
// (`runc update` through the supervisor).
func (s *Server) UpdateContainerResources(ctx context.Context, r *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	lr := r.GetLinux()
	if lr == nil {
		if _, err := s.recs.container(r.GetContainerId()); err != nil {
			return nil, toStatus(err)
		}
		return &runtimeapi.UpdateContainerResourcesResponse{}, nil
	}
	id, err := s.runningContainer(ctx, r.GetContainerId())
	if err != nil {
		return nil, toStatus(err)
	}
	if err := s.sup.Update(ctx, supervisor.UpdateRequest{ID: id, Resources: linuxResources(lr)}); err != nil {
		return nil, toStatus(fmt.Errorf("container %s: update resources: %w", id, err))
	}
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}

func linuxResources(lr *runtimeapi.LinuxContainerResources) *specs.LinuxResources {
	out := &specs.LinuxResources{CPU: &specs.LinuxCPU{Cpus: lr.GetCpusetCpus(), Mems: lr.GetCpusetMems()}}
	if v := lr.GetCpuShares(); v > 0 {
		shares := uint64(v)
		out.CPU.Shares = &shares
	}
	if v := lr.GetCpuQuota(); v != 0 {
		out.CPU.Quota = &v
	}
	if v := lr.GetCpuPeriod(); v > 0 {
		period := uint64(v)
		out.CPU.Period = &period
	}
	if v := lr.GetMemoryLimitInBytes(); v > 0 {
		out.Memory = &specs.LinuxMemory{Limit: &v}
		if sw := lr.GetMemorySwapLimitInBytes(); sw > 0 {
			out.Memory.Swap = &sw
		}
	}
	return out
}

// ReopenContainerLog makes the container's shim reopen its CRI log file
// (kubelet renamed it to rotate it).
func (s *Server) ReopenContainerLog(ctx context.Context, r *runtimeapi.ReopenContainerLogRequest) (*runtimeapi.ReopenContainerLogResponse, error) {
	id, err := s.runningContainer(ctx, r.GetContainerId())
	if err != nil {
		return nil, toStatus(err)
	}
	if err := s.sup.ReopenLog(ctx, id, "init"); err != nil {
		return nil, toStatus(fmt.Errorf("container %s: reopen log: %w", id, err))
	}
	return &runtimeapi.ReopenContainerLogResponse{}, nil
}
