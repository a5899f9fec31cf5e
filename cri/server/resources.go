package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sync"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/internal/atomicfile"
	"github.com/evjournal/containerd/supervisor"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// In-place resize. A container's resources are what its config asked at
// create, then what each UpdateContainerResources applied: kept in memory
// and in <container dir>/resources.json (written once `runc update` has
// applied them), reported by ContainerStatus.resources, which kubelet
// compares with what it asked to know a resize is done. A pod's resources
// (UpdatePodSandboxResources) are kept and reported the same way; the
// daemon does not write them into the pod's cgroup (docs/cri.md, Behaviour
// decisions).

const resourcesFile = "resources.json"

// liveResources is the current value of what changes after the record was
// written: one per container (its linux resources) or pod (its overhead
// and resources). Its mutex also orders the updates of one object.
type liveResources[T proto.Message] struct {
	mu  sync.Mutex
	cur T // guarded by mu; never changed in place (replaced)
}

func (l *liveResources[T]) get() T {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur
}

// loadResources reads dir's resources file into a copy of initial (its
// value when none was written: an object never updated).
func loadResources[T proto.Message](dir string, initial T) (T, error) {
	data, err := os.ReadFile(filepath.Join(dir, resourcesFile))
	if errors.Is(err, fs.ErrNotExist) {
		return initial, nil
	}
	if err != nil {
		return initial, err
	}
	v := initial.ProtoReflect().New().Interface().(T)
	if err := unmarshalProto(data, v); err != nil {
		return initial, fmt.Errorf("%s: %w", filepath.Join(dir, resourcesFile), err)
	}
	return v, nil
}

// storeResources writes v as dir's resources file.
func storeResources(dir string, v proto.Message) error {
	data, err := marshalProto(v)
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, resourcesFile), data, 0o600)
}

// newContainer is a container of a record, its resources as last applied
// (dir's file), else as its config asked.
func newContainer(rec containerRecord, cfg *runtimeapi.ContainerConfig, dir string) (*container, error) {
	initial := cfg.GetLinux().GetResources()
	if initial == nil {
		initial = &runtimeapi.LinuxContainerResources{}
	}
	cur, err := loadResources(dir, initial)
	return &container{rec: rec, cfg: cfg, res: &liveResources[*runtimeapi.LinuxContainerResources]{cur: cur}}, err
}

// resources are the container's current linux resources.
func (c *container) resources() *runtimeapi.LinuxContainerResources {
	if c.res == nil {
		return c.cfg.GetLinux().GetResources()
	}
	return c.res.get()
}

// UpdateContainerResources changes a running container's cgroup limits
// (`runc update`, through the supervisor's queue of the container, with
// the runtime the container runs on), then records them for its status.
// Fields left zero keep their value, as containerd merges them.
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
	c, err := s.recs.container(id)
	if err != nil {
		return nil, toStatus(err)
	}
	if err := s.updateContainer(ctx, c, lr); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}

// updateContainer applies lr and then records the merged value: a crash
// between the two leaves the status reporting the old one, and kubelet,
// seeing the resize not done, asks again (an update is idempotent).
func (s *Server) updateContainer(ctx context.Context, c *container, lr *runtimeapi.LinuxContainerResources) error {
	id := c.rec.ID
	if c.res == nil {
		return fmt.Errorf("container %s: no record of its resources: %w", id, errdefs.ErrInternal)
	}
	c.res.mu.Lock()
	defer c.res.mu.Unlock()
	if err := s.sup.Update(ctx, supervisor.UpdateRequest{ID: id, Resources: linuxResources(lr)}); err != nil {
		return fmt.Errorf("container %s: update resources: %w", id, err)
	}
	merged := mergeResources(c.res.cur, lr)
	if err := storeResources(s.containerDir(id), merged); err != nil {
		return fmt.Errorf("container %s: resources applied, not recorded: %w", id, err)
	}
	c.res.cur = merged
	return nil
}

// mergeResources is cur with every field upd sets (non-zero) replaced, and
// upd's unified entries added, as containerd merges an update into the
// container's spec.
func mergeResources(cur, upd *runtimeapi.LinuxContainerResources) *runtimeapi.LinuxContainerResources {
	out := proto.Clone(cur).(*runtimeapi.LinuxContainerResources)
	if out == nil {
		out = &runtimeapi.LinuxContainerResources{}
	}
	set := func(dst *int64, v int64) {
		if v != 0 {
			*dst = v
		}
	}
	set(&out.CpuPeriod, upd.GetCpuPeriod())
	set(&out.CpuQuota, upd.GetCpuQuota())
	set(&out.CpuShares, upd.GetCpuShares())
	set(&out.MemoryLimitInBytes, upd.GetMemoryLimitInBytes())
	set(&out.OomScoreAdj, upd.GetOomScoreAdj())
	set(&out.MemorySwapLimitInBytes, upd.GetMemorySwapLimitInBytes())
	if v := upd.GetCpusetCpus(); v != "" {
		out.CpusetCpus = v
	}
	if v := upd.GetCpusetMems(); v != "" {
		out.CpusetMems = v
	}
	if len(upd.GetHugepageLimits()) > 0 {
		out.HugepageLimits = upd.GetHugepageLimits()
	}
	if len(upd.GetUnified()) > 0 {
		if out.Unified == nil {
			out.Unified = map[string]string{}
		}
		maps.Copy(out.Unified, upd.GetUnified())
	}
	return out
}

// linuxResources is what `runc update` is given: the fields the request
// sets (zero leaves a limit as it is).
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

// podResources is what UpdatePodSandboxResources last said of a pod.
type podResources = runtimeapi.UpdatePodSandboxResourcesRequest

// UpdatePodSandboxResources records the pod's overhead and resources
// (kubelet sends them after it resized the pod's cgroup itself) and
// reports them in the pod's verbose status. It changes no cgroup:
// kubelet owns the pod's, and sizes it in an order (grow before the
// containers, shrink after) that a second writer could only race.
func (s *Server) UpdatePodSandboxResources(ctx context.Context, r *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	sb, err := s.recs.sandbox(r.GetPodSandboxId())
	if err != nil {
		return nil, toStatus(err)
	}
	if _, err := s.objectOf(ctx, sb.rec.ID); err != nil {
		return nil, toStatus(fmt.Errorf("pod sandbox %s: %w", sb.rec.ID, err))
	}
	v := &podResources{Overhead: r.GetOverhead(), Resources: r.GetResources()}
	if sb.res == nil {
		return nil, toStatus(fmt.Errorf("pod sandbox %s: no record of its resources: %w", sb.rec.ID, errdefs.ErrInternal))
	}
	sb.res.mu.Lock()
	defer sb.res.mu.Unlock()
	if err := storeResources(s.sandboxDir(sb.rec.ID), v); err != nil {
		return nil, toStatus(fmt.Errorf("pod sandbox %s: record its resources: %w", sb.rec.ID, err))
	}
	sb.res.cur = v
	return &runtimeapi.UpdatePodSandboxResourcesResponse{}, nil
}

// newSandbox is a pod of a record, with the resources last recorded.
func newSandbox(rec sandboxRecord, cfg *runtimeapi.PodSandboxConfig, dir string) (*sandbox, error) {
	cur, err := loadResources(dir, (*podResources)(nil))
	return &sandbox{rec: rec, cfg: cfg, res: &liveResources[*podResources]{cur: cur}}, err
}

// resources are what UpdatePodSandboxResources last said; nil if nothing.
func (sb *sandbox) resources() *podResources {
	if sb.res == nil {
		return nil
	}
	return sb.res.get()
}
