package server

import (
	"context"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ContainerStats: see containerStats. A container that is not running has
// its attributes and writable layer only (docs/cri.md).
func (s *Server) ContainerStats(ctx context.Context, r *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	c, err := s.recs.container(r.GetContainerId())
	if err != nil {
		return nil, toStatus(err)
	}
	o, err := s.objectOf(ctx, c.rec.ID)
	if err != nil {
		return nil, toStatus(fmt.Errorf("container %s: %w", c.rec.ID, err))
	}
	st, _ := s.containerStats(c, o, time.Now().Add(layerWait))
	return &runtimeapi.ContainerStatsResponse{Stats: st}, nil
}

// ListContainerStats reads the matching containers' cgroups, statsWorkers
// at a time, after one turn of the loop for their states. A container
// whose cgroup cannot be read is listed without usage (and logged): one
// container never fails the list, which kubelet's summary needs whole.
func (s *Server) ListContainerStats(ctx context.Context, r *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	f := r.GetFilter()
	var cs []*container
	for _, c := range s.recs.allContainers() {
		if c.matches(f.GetId(), f.GetPodSandboxId(), f.GetLabelSelector()) {
			cs = append(cs, c)
		}
	}
	objs, err := s.objectMap(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &runtimeapi.ListContainerStatsResponse{Stats: make([]*runtimeapi.ContainerStats, len(cs))}
	deadline := time.Now().Add(layerWait)
	parallel(len(cs), func(i int) { out.Stats[i], _ = s.containerStats(cs[i], objs[cs[i].rec.ID], deadline) })
	return out, nil
}

// PodSandboxStats: see podStats.
func (s *Server) PodSandboxStats(ctx context.Context, r *runtimeapi.PodSandboxStatsRequest) (*runtimeapi.PodSandboxStatsResponse, error) {
	sb, err := s.recs.sandbox(r.GetPodSandboxId())
	if err != nil {
		return nil, toStatus(err)
	}
	objs, err := s.objectMap(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.PodSandboxStatsResponse{Stats: s.podStats(sb, objs, time.Now().Add(layerWait))}, nil
}

// ListPodSandboxStats: each matching pod's podStats, statsWorkers pods at
// a time, after one turn of the loop. A pod whose cgroup or network cannot
// be read is listed without them (and logged).
func (s *Server) ListPodSandboxStats(ctx context.Context, r *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	f := r.GetFilter()
	var sbs []*sandbox
	for _, sb := range s.recs.allSandboxes() {
		if sb.matches(f.GetId(), f.GetLabelSelector()) {
			sbs = append(sbs, sb)
		}
	}
	objs, err := s.objectMap(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &runtimeapi.ListPodSandboxStatsResponse{Stats: make([]*runtimeapi.PodSandboxStats, len(sbs))}
	deadline := time.Now().Add(layerWait)
	parallel(len(sbs), func(i int) { out.Stats[i] = s.podStats(sbs[i], objs, deadline) })
	return out, nil
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
