package server

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/evjournal/containerd/supervisor/objects"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PodSandboxStatus is the pod's record with the loop's view of it and of
// its containers, taken in one turn of the loop.
func (s *Server) PodSandboxStatus(ctx context.Context, r *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	sb, err := s.recs.sandbox(r.GetPodSandboxId())
	if err != nil {
		return nil, toStatus(err)
	}
	objs, err := s.objectMap(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	var cs []*runtimeapi.ContainerStatus
	for _, c := range s.recs.containersOf(sb.rec.ID) {
		if o, ok := objs[c.rec.ID]; ok {
			cs = append(cs, containerStatus(c, o))
		}
	}
	// Newest first: kubelet with EventedPLEG takes this list as the pod's
	// container statuses without sorting it, and its first status of a
	// name is what it takes for that container's latest attempt. In map
	// order an older, exited attempt could come first: kubelet then asked
	// to create an attempt that existed (AlreadyExists) and did not restart
	// the container (kubelet-e2e with KUBELET_FEATURE_GATES=EventedPLEG=true).
	slices.SortStableFunc(cs, func(a, b *runtimeapi.ContainerStatus) int { return cmp.Compare(b.CreatedAt, a.CreatedAt) })
	resp := &runtimeapi.PodSandboxStatusResponse{Status: sandboxStatus(sb, objs[sb.rec.ID]), ContainersStatuses: cs, Timestamp: time.Now().UnixNano()}
	if r.GetVerbose() {
		resp.Info = sandboxInfo(sb)
	}
	return resp, nil
}

// sandboxInfo is a verbose status's extra information: the resources
// UpdatePodSandboxResources last gave the pod ("resources": the request's
// overhead and resources as JSON), when it did.
func sandboxInfo(sb *sandbox) map[string]string {
	info := map[string]string{}
	if res := sb.resources(); res != nil {
		if data, err := marshalProto(res); err == nil {
			info["resources"] = string(data)
		}
	}
	return info
}

// sandboxStatus is the CRI status of a pod: READY while its pause process
// runs and no removal is under way.
func sandboxStatus(sb *sandbox, o objects.Object) *runtimeapi.PodSandboxStatus {
	st := &runtimeapi.PodSandboxStatus{
		Id: sb.rec.ID, Metadata: sb.cfg.GetMetadata(), State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY,
		CreatedAt: sb.rec.CreatedAt, Labels: sb.cfg.GetLabels(), Annotations: sb.cfg.GetAnnotations(), RuntimeHandler: sb.rec.RuntimeHandler,
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: sb.cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()}},
	}
	if o.State == objects.Running && !o.Removing {
		st.State = runtimeapi.PodSandboxState_SANDBOX_READY
	}
	if len(sb.rec.IPs) > 0 {
		st.Network = &runtimeapi.PodSandboxNetworkStatus{Ip: sb.rec.IPs[0]}
		for _, ip := range sb.rec.IPs[1:] {
			st.Network.AdditionalIps = append(st.Network.AdditionalIps, &runtimeapi.PodIP{Ip: ip})
		}
	}
	return st
}

// ListPodSandbox lists the visible pods, oldest first.
func (s *Server) ListPodSandbox(ctx context.Context, r *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	f := r.GetFilter()
	objs, err := s.objectMap(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	var out []*runtimeapi.PodSandbox
	for _, sb := range s.recs.allSandboxes() {
		o, ok := objs[sb.rec.ID]
		if !ok {
			continue // being made, or removed meanwhile
		}
		st := sandboxStatus(sb, o)
		if !sb.matches(f.GetId(), f.GetLabelSelector()) || f.GetState() != nil && f.GetState().GetState() != st.State {
			continue
		}
		out = append(out, &runtimeapi.PodSandbox{Id: st.Id, Metadata: st.Metadata, State: st.State, CreatedAt: st.CreatedAt,
			Labels: st.Labels, Annotations: st.Annotations, RuntimeHandler: st.RuntimeHandler})
	}
	slices.SortFunc(out, func(a, b *runtimeapi.PodSandbox) int { return cmp.Compare(a.CreatedAt, b.CreatedAt) })
	return &runtimeapi.ListPodSandboxResponse{Items: out}, nil
}

// matches says whether the pod passes a filter's id prefix and label
// selector (what ListPodSandbox and ListPodSandboxStats filter on alike).
func (sb *sandbox) matches(id string, selector map[string]string) bool {
	return strings.HasPrefix(sb.rec.ID, id) && labelsMatch(sb.cfg.GetLabels(), selector)
}

// matches says whether the container passes a filter's id and pod id
// prefixes and label selector (ListContainers, ListContainerStats).
func (c *container) matches(id, sandboxID string, selector map[string]string) bool {
	return strings.HasPrefix(c.rec.ID, id) && strings.HasPrefix(c.rec.SandboxID, sandboxID) && labelsMatch(c.cfg.GetLabels(), selector)
}

func labelsMatch(labels, selector map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}
