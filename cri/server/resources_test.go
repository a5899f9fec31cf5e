package server

import (
	"context"
	"encoding/json"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func (e *env) ctrResources(id string) *runtimeapi.LinuxContainerResources {
	e.t.Helper()
	return e.ctrStatus(id).GetResources().GetLinux()
}

func wantResources(t *testing.T, what string, got, want *runtimeapi.LinuxContainerResources) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Fatalf("%s: resources %v, want %v", what, got, want)
	}
}

// TestContainerResources: ContainerStatus.resources is what the config
// asked, then what each UpdateContainerResources applied (fields left zero
// keep their value, unified entries are merged), also after a restart; an
// update the runtime refuses changes nothing reported; only a running
// container is updated.
func TestContainerResources(t *testing.T) {
	e := newEnv(t)
	pod := e.runPod("p")
	cfg := ctrConfig("c")
	cfg.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{CpuShares: 512, MemoryLimitInBytes: 64 << 20, CpuPeriod: 100000}}
	r, err := e.srv.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	id := r.ContainerId
	wantResources(t, "created", e.ctrResources(id), cfg.Linux.Resources)
	update := func(lr *runtimeapi.LinuxContainerResources) error {
		_, err := e.srv.UpdateContainerResources(context.Background(), &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id, Linux: lr})
		return err
	}
	wantCode(t, update(&runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 1 << 30}), codes.FailedPrecondition, "not running")
	if _, err := e.srv.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	if err := update(&runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 128 << 20, CpuQuota: 50000, Unified: map[string]string{"memory.high": "max"}}); err != nil {
		t.Fatal(err)
	}
	want := &runtimeapi.LinuxContainerResources{CpuShares: 512, CpuPeriod: 100000, CpuQuota: 50000, MemoryLimitInBytes: 128 << 20, Unified: map[string]string{"memory.high": "max"}}
	wantResources(t, "updated", e.ctrResources(id), want)
	if n := len(e.f.calls("Update")); n != 1 {
		t.Fatalf("%d runtime updates, want 1 (the refused one before the start made none)", n)
	}

	e.f.set("Update", failOnce(errInjected))
	wantCode(t, update(&runtimeapi.LinuxContainerResources{CpuShares: 2}), codes.Unknown, errInjected.Error())
	wantResources(t, "after a refused update", e.ctrResources(id), want)

	e.restart()
	wantResources(t, "after a restart", e.ctrResources(id), want)
	if err := update(&runtimeapi.LinuxContainerResources{CpuShares: 1024, Unified: map[string]string{"pids.max": "10"}}); err != nil {
		t.Fatal(err)
	}
	want.CpuShares, want.Unified["pids.max"] = 1024, "10"
	wantResources(t, "updated after the restart", e.ctrResources(id), want)
	_, err = e.srv.UpdateContainerResources(context.Background(), &runtimeapi.UpdateContainerResourcesRequest{ContainerId: "nosuchcontainer", Linux: want})
	wantCode(t, err, codes.NotFound)
}

// TestPodSandboxResources: UpdatePodSandboxResources is recorded and
// shown in the pod's verbose status (also after a restart), and changes
// nothing the runtime runs; an unknown pod is NotFound.
func TestPodSandboxResources(t *testing.T) {
	e := newEnv(t)
	pod := e.runPod("p")
	info := func() map[string]string {
		r, err := e.srv.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: pod, Verbose: true})
		if err != nil {
			t.Fatal(err)
		}
		return r.Info
	}
	if got := info()["resources"]; got != "" {
		t.Fatalf("resources %q before any update", got)
	}
	req := &runtimeapi.UpdatePodSandboxResourcesRequest{PodSandboxId: pod, Overhead: &runtimeapi.LinuxContainerResources{CpuShares: 10},
		Resources: &runtimeapi.LinuxContainerResources{CpuShares: 1024, MemoryLimitInBytes: 256 << 20}}
	if _, err := e.srv.UpdatePodSandboxResources(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		var got struct {
			Overhead  struct{ CpuShares string }
			Resources struct{ CpuShares, MemoryLimitInBytes string }
		}
		if err := json.Unmarshal([]byte(info()["resources"]), &got); err != nil || got.Overhead.CpuShares != "10" ||
			got.Resources.CpuShares != "1024" || got.Resources.MemoryLimitInBytes != "268435456" {
			t.Fatalf("%s: the pod's resources %q (%v)", when, info()["resources"], err)
		}
	}
	check("updated")
	e.restart()
	check("after a restart")
	if n := len(e.f.calls("Update")); n != 0 {
		t.Fatalf("%d runtime updates for a pod's resources, want none", n)
	}
	_, err := e.srv.UpdatePodSandboxResources(context.Background(), &runtimeapi.UpdatePodSandboxResourcesRequest{PodSandboxId: "nosuchpod"})
	wantCode(t, err, codes.NotFound)
}
