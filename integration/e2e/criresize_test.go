package e2e

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// cgroupFile is a v1 cgroup file of a process: controller's hierarchy
// ("cpu" is found in a "cpu,cpuacct" one too).
func cgroupFile(t *testing.T, pid int, controller, file string) string {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == controller {
				return filepath.Join("/sys/fs/cgroup", parts[1], parts[2], file)
			}
		}
	}
	t.Fatalf("pid %d: no %s cgroup (v1)", pid, controller)
	return ""
}

// TestCRIInPlaceResize: UpdateContainerResources reaches the container's
// cgroup (memory limit, CPU quota and shares) and ContainerStatus.resources
// reports the container's resources as its config asked, then as each
// update left them (fields an update leaves zero keep their value), also
// after a SIGKILL of the daemon; UpdatePodSandboxResources is accepted and
// shown in the pod's verbose status.
func TestCRIInPlaceResize(t *testing.T) {
	t.Parallel()
	e := newCRIEnv(t)
	ctx := cctx(t)
	initial := &runtimeapi.LinuxContainerResources{CpuShares: 512, CpuPeriod: 100000, CpuQuota: 50000, MemoryLimitInBytes: 64 << 20}
	_, podID, cid := runSleeper(t, e, "resize", e.pushTestinit(t, "e2e/resize:1"), func(c *runtimeapi.ContainerConfig) {
		c.Linux.Resources = proto.Clone(initial).(*runtimeapi.LinuxContainerResources)
	})
	reported := func(when string, want *runtimeapi.LinuxContainerResources) {
		t.Helper()
		st, err := e.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: cid})
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Status.GetResources().GetLinux(); !proto.Equal(got, want) {
			t.Fatalf("%s: ContainerStatus.resources %v, want %v", when, got, want)
		}
	}
	reported("created", initial)
	if _, err := e.rt.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: cid,
		Linux: &runtimeapi.LinuxContainerResources{CpuQuota: 150000, CpuShares: 1024, MemoryLimitInBytes: 128 << 20}}); err != nil {
		t.Fatalf("UpdateContainerResources: %v", err)
	}
	want := &runtimeapi.LinuxContainerResources{CpuShares: 1024, CpuPeriod: 100000, CpuQuota: 150000, MemoryLimitInBytes: 128 << 20}
	pid := initPid(t, e.d, cid)
	for _, f := range []struct{ controller, file, want string }{
		{"memory", "memory.limit_in_bytes", fmt.Sprint(128 << 20)}, {"cpu", "cpu.cfs_quota_us", "150000"}, {"cpu", "cpu.shares", "1024"},
	} {
		if got := readTrim(t, cgroupFile(t, pid, f.controller, f.file)); got != f.want {
			t.Errorf("%s after the update: %s, want %s", f.file, got, f.want)
		}
	}
	reported("updated", want)

	if _, err := e.rt.UpdatePodSandboxResources(ctx, &runtimeapi.UpdatePodSandboxResourcesRequest{PodSandboxId: podID,
		Overhead: &runtimeapi.LinuxContainerResources{CpuShares: 2}, Resources: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 256 << 20}}); err != nil {
		t.Fatalf("UpdatePodSandboxResources: %v", err)
	}
	ps, err := e.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: podID, Verbose: true})
	if err != nil || !strings.Contains(ps.Info["resources"], `"memoryLimitInBytes":"268435456"`) {
		t.Fatalf("the pod's verbose status: %v (%v), want its resources", ps.GetInfo(), err)
	}

	e.d.Kill()
	restart(t, e.d)
	reported("after a SIGKILL of the daemon", want)
	removePod(t, e, podID)
}

// TestCRIUpdateRuntimeConfig: with --cni-conf-template and no CNI config,
// the network is not ready until kubelet sends the node's pod CIDR; then
// the template is written into the conf dir with the CIDR, the network is
// ready and a pod gets an address of that CIDR.
func TestCRIUpdateRuntimeConfig(t *testing.T) {
	t.Parallel()
	e := prepareCRIEnv(t, func(e *criEnv) []string {
		conf, err := os.ReadFile(e.cniConf)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := filepath.Join(t.TempDir(), "cni.tmpl")
		if err := os.WriteFile(tmpl, []byte(strings.Replace(string(conf), fmt.Sprintf("%q", e.subnet), `"{{.PodCIDR}}"`, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(e.cniConf); err != nil {
			t.Fatal(err)
		}
		return []string{"--cni-conf-template", tmpl}
	})
	e.start(t)
	ctx := cctx(t)
	netReady := func() bool {
		st, err := e.rt.Status(ctx, &runtimeapi.StatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range st.Status.Conditions {
			if c.Type == runtimeapi.NetworkReady {
				return c.Status
			}
		}
		return false
	}
	if netReady() {
		t.Fatal("NetworkReady before any CNI config")
	}
	if _, err := e.rt.UpdateRuntimeConfig(ctx, &runtimeapi.UpdateRuntimeConfigRequest{
		RuntimeConfig: &runtimeapi.RuntimeConfig{NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: e.subnet}}}); err != nil {
		t.Fatalf("UpdateRuntimeConfig: %v", err)
	}
	if !netReady() {
		t.Fatal("NetworkReady false after the pod CIDR came")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(e.cniConf), "10-containerd-net.conflist")); err != nil {
		t.Fatal(err)
	}
	_, podID, _ := runSleeper(t, e, "cidr", e.pushTestinit(t, "e2e/cidr:1"), nil)
	ps, err := e.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: podID})
	if err != nil {
		t.Fatal(err)
	}
	_, subnet, _ := net.ParseCIDR(e.subnet)
	if ip := net.ParseIP(ps.Status.GetNetwork().GetIp()); ip == nil || !subnet.Contains(ip) {
		t.Fatalf("the pod's address %q, want one of %s", ps.Status.GetNetwork().GetIp(), e.subnet)
	}
	removePod(t, e, podID)
}
