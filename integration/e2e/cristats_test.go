package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/evjournal/containerd/integration/fixture"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestCRIStats: stats read from real cgroups, a real overlay and a real
// pod network.
//
//   - The pause and the containers run in cgroups under the pod's
//     cgroup_parent (their /proc/<pid>/cgroup), whose CPU and memory the
//     pod's stats report, with the containers' process count.
//   - A container's writable layer grows after it writes to its rootfs
//     (20 dirs: 20 inodes, each a block).
//   - The pod's network counters grow after traffic to the pod's IP.
//   - With one container's cgroup removed under it (its process moved to
//     the root cgroups), ListContainerStats and ListPodSandboxStats still
//     succeed: that container without usage, the other with it.
//   - A stopped container answers its attributes and writable layer.
func TestCRIStats(t *testing.T) {
	t.Parallel()
	e := newCRIEnv(t)
	ctx := cctx(t)
	ref := e.pushTestinit(t, "e2e/stats:1")
	pulled, err := e.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatal(err)
	}
	node := criNode(t, e, filepath.Join(e.d.Dir, "root"))
	node.CgroupParent = "/crie2estats-" + randHex(4)
	t.Cleanup(node.RemoveCgroupParent) // after the pod's removal (cleanups run last first)
	pod := e.podConfig(t, "stats")
	pod.Linux.CgroupParent = node.CgroupParent
	run, err := e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: pod})
	if err != nil {
		t.Fatal(err)
	}
	podID := run.PodSandboxId
	serve := func(c *runtimeapi.ContainerConfig) {
		c.Args = []string{"serve", "8080", "hello", "--", "sleep", "forever"}
	}
	writer := startSleeper(t, e, pod, podID, "writer", pulled.ImageRef, serve)
	victim := startSleeper(t, e, pod, podID, "victim", pulled.ImageRef, nil)

	pids := map[string]int{}
	runc, err := node.RuncList()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runc {
		pids[r.ID] = r.Pid
	}
	for _, id := range []string{podID, writer, victim} {
		for _, line := range procCgroups(t, pids[id]) {
			if !strings.HasPrefix(line.path, node.CgroupParent+"/") {
				t.Errorf("%s (pid %d) is in cgroup %s of %q, not under the pod's %s", id, pids[id], line.path, line.controllers, node.CgroupParent)
			}
		}
	}

	ps := podStats(t, e, podID)
	if ps.Linux.Cpu.GetUsageCoreNanoSeconds().GetValue() == 0 || ps.Linux.Memory.GetUsageBytes().GetValue() == 0 ||
		ps.Linux.Process.GetProcessCount().GetValue() < 2 || len(ps.Linux.Containers) != 2 {
		t.Fatalf("pod stats: cpu %v memory %v processes %v containers %d", ps.Linux.Cpu, ps.Linux.Memory, ps.Linux.Process, len(ps.Linux.Containers))
	}
	if ps.Linux.Network.GetDefaultInterface().GetName() != "eth0" {
		t.Fatalf("pod network: %v, want eth0 the default", ps.Linux.Network)
	}

	// Writes to the rootfs grow the writable layer.
	before := ctrStats(t, e, writer).WritableLayer
	fsInfo, err := e.img.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// kubelet finds the writable layers' capacity by this mountpoint.
	if before == nil || before.FsId.GetMountpoint() != fsInfo.ImageFilesystems[0].GetFsId().GetMountpoint() {
		t.Fatalf("writable layer: %v, want it on the image filesystem %v", before, fsInfo.ImageFilesystems[0].GetFsId())
	}
	var steps []string
	for i := range 20 {
		steps = append(steps, fmt.Sprintf("mkdir /grown%d", i))
	}
	if ex, err := execSync(t, e, writer, strings.Join(steps, " -- ")); err != nil || ex.ExitCode != 0 {
		t.Fatalf("ExecSync mkdir: %v %v", ex, err)
	}
	after := waitStats(t, "the writable layer to grow by 20 inodes", func() (bool, string) {
		w := ctrStats(t, e, writer).WritableLayer
		return w.GetInodesUsed().GetValue() >= before.InodesUsed.GetValue()+20 && w.GetUsedBytes().GetValue() > before.UsedBytes.GetValue(), w.String()
	})
	t.Logf("writable layer: %v -> %s", before, after)

	// Traffic to the pod's IP grows its counters.
	st, err := e.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: podID})
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(st.Status.GetNetwork().GetIp(), "8080")
	rx0 := ps.Linux.Network.DefaultInterface.RxBytes.GetValue()
	for range 10 {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial the pod: %v", err)
		}
		if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "hello\n" {
			t.Fatalf("the pod answered %q, %v", line, err)
		}
		c.Close()
	}
	ps = podStats(t, e, podID)
	if rx := ps.Linux.Network.DefaultInterface.RxBytes.GetValue(); rx <= rx0 || ps.Linux.Network.DefaultInterface.TxBytes.GetValue() == 0 {
		t.Fatalf("pod network after 10 connections: rx %d (before %d), tx %d", rx, rx0, ps.Linux.Network.DefaultInterface.TxBytes.GetValue())
	}

	// The victim's cgroups removed under it: both lists still succeed.
	detachCgroups(t, pids[victim])
	list, err := e.rt.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: &runtimeapi.ContainerStatsFilter{PodSandboxId: podID}})
	if err != nil {
		t.Fatalf("ListContainerStats with a container's cgroup gone: %v", err)
	}
	for _, s := range list.Stats {
		switch s.Attributes.Id {
		case victim:
			if s.Cpu != nil || s.Memory != nil {
				t.Errorf("the container whose cgroup is gone: %v", s)
			}
		case writer:
			if s.Cpu == nil || s.Memory.GetWorkingSetBytes() == nil {
				t.Errorf("the other container: %v", s)
			}
		}
	}
	if len(list.Stats) != 2 {
		t.Errorf("listed %d containers, want 2", len(list.Stats))
	}
	if _, err := e.rt.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{}); err != nil {
		t.Fatalf("ListPodSandboxStats with a container's cgroup gone: %v", err)
	}

	// Stopped: attributes and writable layer, no usage.
	if _, err := e.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: writer, Timeout: 10}); err != nil {
		t.Fatal(err)
	}
	s := ctrStats(t, e, writer)
	if s.Cpu != nil || s.Memory != nil || s.WritableLayer.GetInodesUsed().GetValue() < before.InodesUsed.GetValue()+20 {
		t.Errorf("stats of the stopped container: %v", s)
	}
	// Not removePod: it checks each running container's memory cgroup is
	// gone, and the victim's is the root now.
	if _, err := e.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: podID}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: podID}); err != nil {
		t.Fatal(err)
	}
	if bad := fixture.WaitChecked(ctx, 10*time.Second, node.CheckEmpty); len(bad) > 0 {
		t.Errorf("left after the pod's removal: %v", bad)
	}
}

func ctrStats(t *testing.T, e *criEnv, id string) *runtimeapi.ContainerStats {
	t.Helper()
	r, err := e.rt.ContainerStats(cctx(t), &runtimeapi.ContainerStatsRequest{ContainerId: id})
	if err != nil {
		t.Fatalf("ContainerStats %s: %v", id, err)
	}
	return r.Stats
}

func podStats(t *testing.T, e *criEnv, id string) *runtimeapi.PodSandboxStats {
	t.Helper()
	r, err := e.rt.PodSandboxStats(cctx(t), &runtimeapi.PodSandboxStatsRequest{PodSandboxId: id})
	if err != nil {
		t.Fatalf("PodSandboxStats %s: %v", id, err)
	}
	return r.Stats
}

// waitStats polls done until it holds (a measure is cached for 2 s and no
// event says when the next one is taken), failing after 20 s.
func waitStats(t *testing.T, what string, done func() (bool, string)) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, last := done()
		if ok {
			return last
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: last %s", what, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

type cgroupLine struct{ controllers, path string }

// procCgroups is /proc/<pid>/cgroup (named hierarchies left out).
func procCgroups(t *testing.T, pid int) []cgroupLine {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	var out []cgroupLine
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 || strings.HasPrefix(f[1], "name=") {
			continue
		}
		out = append(out, cgroupLine{controllers: f[1], path: f[2]})
	}
	return out
}

// detachCgroups moves pid to the root cgroup of each of its hierarchies
// and removes the cgroups it was in: the process runs on without them.
// The unified hierarchy ("0::") is /sys/fs/cgroup/unified on a hybrid
// host, /sys/fs/cgroup on a v2 one. Nothing is created: cgroup.procs is
// opened as it is.
func detachCgroups(t *testing.T, pid int) {
	t.Helper()
	for _, l := range procCgroups(t, pid) {
		mount := ""
		if l.controllers == "" {
			for _, m := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
				if _, err := os.Stat(filepath.Join(m, "cgroup.controllers")); err == nil {
					mount = m
					break
				}
			}
		} else {
			dirs, _ := filepath.Glob("/sys/fs/cgroup/*")
			for _, d := range dirs {
				if fi, err := os.Lstat(d); err == nil && fi.IsDir() && strings.Contains(","+filepath.Base(d)+",", ","+strings.Split(l.controllers, ",")[0]+",") {
					mount = d
					break
				}
			}
		}
		if mount == "" {
			t.Fatalf("no mount of the hierarchy of %q", l.controllers)
		}
		f, err := os.OpenFile(filepath.Join(mount, "cgroup.procs"), os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString(strconv.Itoa(pid))
			f.Close()
		}
		if err != nil {
			t.Fatalf("move %d out of %s: %v", pid, l.path, err)
		}
		if err := os.Remove(filepath.Join(mount, l.path)); err != nil && !os.IsNotExist(err) {
			t.Fatalf("remove cgroup %s of %q: %v", l.path, l.controllers, err)
		}
	}
	for _, l := range procCgroups(t, pid) {
		if l.path != "/" {
			t.Fatalf("pid %d still in %s of %q", pid, l.path, l.controllers)
		}
	}
}

// TestCRIStatsScale measures ListContainerStats and ListPodSandboxStats
// with CRISTATS_PODS pods of one container each (default 5; the figure
// of the docs is for 50), on pods with a cgroup parent as kubelet makes
// them, and checks every running container and pod is reported with usage.
func TestCRIStatsScale(t *testing.T) {
	t.Parallel()
	n := 5
	if v, err := strconv.Atoi(os.Getenv("CRISTATS_PODS")); err == nil && v > 0 {
		n = v
	}
	e := newCRIEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ref := e.pushTestinit(t, "e2e/statsscale:1")
	pulled, err := e.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatal(err)
	}
	node := criNode(t, e, filepath.Join(e.d.Dir, "root"))
	node.CgroupParent = "/crie2escale-" + randHex(4)
	t.Cleanup(node.RemoveCgroupParent)
	for i := range n {
		pod := e.podConfig(t, fmt.Sprintf("scale%d", i))
		pod.Linux.CgroupParent = node.CgroupParent
		run, err := e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: pod})
		if err != nil {
			t.Fatal(err)
		}
		startSleeper(t, e, pod, run.PodSandboxId, "c", pulled.ImageRef, nil)
	}
	timeIt := func(what string, f func() int) {
		var ds []float64
		for range 20 {
			start := time.Now()
			if got := f(); got != n {
				t.Fatalf("%s: %d with usage, want %d", what, got, n)
			}
			ds = append(ds, float64(time.Since(start))/float64(time.Millisecond))
		}
		t.Logf("%s with %d pods: p50/p99 %s ms", what, n, pcts(ds))
	}
	timeIt("ListContainerStats", func() int {
		r, err := e.rt.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		for _, s := range r.Stats {
			if s.Cpu != nil && s.Memory != nil {
				k++
			}
		}
		return k
	})
	timeIt("ListPodSandboxStats", func() int {
		r, err := e.rt.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		for _, s := range r.Stats {
			if s.Linux.Cpu != nil && s.Linux.Memory != nil && s.Linux.Network != nil && len(s.Linux.Containers) == 1 {
				k++
			}
		}
		return k
	})
	e.removeAllPods()
	if bad := fixture.WaitChecked(ctx, 10*time.Second, node.CheckEmpty); len(bad) > 0 {
		t.Errorf("left after the pods' removal: %v", bad)
	}
}
