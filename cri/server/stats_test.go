package server

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evjournal/containerd/image"
	"github.com/opencontainers/cgroups"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeCgroups answers reads from samples set by path; a path without one
// does not exist. It counts the reads.
type fakeCgroups struct {
	mu    sync.Mutex
	smp   map[string]cgroupSample
	err   map[string]error
	reads map[string]int
}

func newFakeCgroups() *fakeCgroups {
	return &fakeCgroups{smp: map[string]cgroupSample{}, err: map[string]error{}, reads: map[string]int{}}
}

func (f *fakeCgroups) read(p string, want cgroups.Controller) (cgroupSample, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads[p]++
	if err, ok := f.err[p]; ok {
		return cgroupSample{}, err
	}
	smp, ok := f.smp[p]
	if !ok {
		return cgroupSample{}, fmt.Errorf("cgroup %s: %w", p, errCgroupGone)
	}
	smp.At = time.Now()
	return smp, nil
}

func (f *fakeCgroups) set(p string, smp cgroupSample) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.smp[p] = smp
	delete(f.err, p)
}

// v1Sample is a cgroup v1 sample: cpu ns, memory usage and limit,
// inactive file, rss, swap (memsw less usage), pids.
func v1Sample(cpu, usage, limit, inactive, rss, swap, pids uint64) cgroupSample {
	st := cgroups.NewStats()
	st.CpuStats.CpuUsage.TotalUsage = cpu
	st.MemoryStats.Usage = cgroups.MemoryData{Usage: usage, Limit: limit}
	st.MemoryStats.SwapUsage = cgroups.MemoryData{Usage: usage + swap, Limit: limit * 2}
	st.MemoryStats.Stats = map[string]uint64{"total_inactive_file": inactive, "total_rss": rss, "total_pgfault": 7, "total_pgmajfault": 3,
		"inactive_file": 999999, "rss": 999999} // the non-hierarchical ones must not be read
	st.PidsStats.Current = pids
	return cgroupSample{Stats: st}
}

// statsEnv is the service on fakes with fake cgroups and network counters.
func statsEnv(t *testing.T) (*env, *fakeCgroups) {
	e := newEnv(t)
	cg := newFakeCgroups()
	e.srv.stats.cg = cg
	e.srv.stats.netDev = func(pid int) ([]ifaceCounters, error) {
		return []ifaceCounters{{name: "eth1", rxBytes: 1}, {name: "eth0", rxBytes: 100 + uint64(pid), txBytes: 200, rxErrors: 1, txErrors: 2}}, nil
	}
	return e, cg
}

func (e *env) runPodWith(cfg *runtimeapi.PodSandboxConfig) string {
	e.t.Helper()
	r, err := e.srv.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		e.t.Fatalf("RunPodSandbox: %v", err)
	}
	return r.PodSandboxId
}

func (e *env) listCtrStats(f *runtimeapi.ContainerStatsFilter) map[string]*runtimeapi.ContainerStats {
	e.t.Helper()
	r, err := e.srv.ListContainerStats(context.Background(), &runtimeapi.ListContainerStatsRequest{Filter: f})
	if err != nil {
		e.t.Fatalf("ListContainerStats: %v", err)
	}
	out := map[string]*runtimeapi.ContainerStats{}
	for _, s := range r.Stats {
		out[s.Attributes.Id] = s
	}
	return out
}

// TestListContainerStatsOneCgroupGone: a container whose cgroup is gone
// (or unreadable) is listed without usage; the others keep theirs and the
// call succeeds (kubelet's summary fails whole on an error). Not running
// containers are listed with attributes only, their cgroup never read.
func TestListContainerStatsOneCgroupGone(t *testing.T) {
	e, cg := statsEnv(t)
	pod := e.runPod("p")
	a, gone, bad := e.runCtr(pod, "a"), e.runCtr(pod, "gone"), e.runCtr(pod, "bad")
	created, err := e.createCtr(context.Background(), pod, "created")
	if err != nil {
		t.Fatal(err)
	}
	cg.set("/"+a, v1Sample(5e9, 100<<20, 1<<30, 10<<20, 50<<20, 0, 3))
	cg.err["/"+bad] = fmt.Errorf("memory.stat: %w", os.ErrPermission)

	got := e.listCtrStats(nil)
	if len(got) != 4 {
		t.Fatalf("listed %d, want 4", len(got))
	}
	if got[a].Cpu.GetUsageCoreNanoSeconds().GetValue() != 5e9 || got[a].Memory.GetWorkingSetBytes().GetValue() != 90<<20 {
		t.Errorf("a: %v %v", got[a].Cpu, got[a].Memory)
	}
	for _, id := range []string{gone, bad, created} {
		if got[id].Cpu != nil || got[id].Memory != nil || got[id].Attributes.Metadata.Name == "" {
			t.Errorf("%s: %v, want attributes without usage", id, got[id])
		}
	}
	if cg.reads["/"+created] != 0 {
		t.Errorf("the created container's cgroup was read")
	}
	// The filters still apply, and ContainerStats of the one whose cgroup
	// is gone answers too.
	if f := e.listCtrStats(&runtimeapi.ContainerStatsFilter{LabelSelector: map[string]string{"ctr": "a"}}); len(f) != 1 || f[a] == nil {
		t.Errorf("label filter: %v", f)
	}
	r, err := e.srv.ContainerStats(context.Background(), &runtimeapi.ContainerStatsRequest{ContainerId: gone})
	if err != nil || r.Stats.Cpu != nil {
		t.Errorf("ContainerStats of the container whose cgroup is gone: %v, %v", r, err)
	}
}

// TestContainerStatsValues: the CRI's fields from v1 and v2 samples:
// working set (usage less inactive file), RSS and faults from the
// hierarchical v1 keys, available (limit less working set), swap (v1:
// memsw less usage), and usage_nano_cores from the second sample on.
func TestContainerStatsValues(t *testing.T) {
	e, cg := statsEnv(t)
	pod := e.runPod("p")
	id := e.runCtr(pod, "a")
	cg.set("/"+id, v1Sample(1e9, 100<<20, 200<<20, 30<<20, 60<<20, 5<<20, 2))
	stats := func() *runtimeapi.ContainerStats {
		r, err := e.srv.ContainerStats(context.Background(), &runtimeapi.ContainerStatsRequest{ContainerId: id})
		if err != nil {
			t.Fatal(err)
		}
		return r.Stats
	}
	s := stats()
	m := s.Memory
	if m.WorkingSetBytes.GetValue() != 70<<20 || m.UsageBytes.GetValue() != 100<<20 || m.RssBytes.GetValue() != 60<<20 ||
		m.AvailableBytes.GetValue() != 130<<20 || m.PageFaults.GetValue() != 7 || m.MajorPageFaults.GetValue() != 3 {
		t.Errorf("memory: %v", m)
	}
	if s.Swap.GetSwapUsageBytes().GetValue() != 5<<20 || s.Swap.GetSwapAvailableBytes().GetValue() != 195<<20 {
		t.Errorf("swap: %v", s.Swap)
	}
	if s.Cpu.UsageNanoCores != nil {
		t.Errorf("usage_nano_cores at the first sample: %v", s.Cpu.UsageNanoCores)
	}
	smp := v1Sample(3e9, 100<<20, 200<<20, 30<<20, 60<<20, 5<<20, 2)
	cg.set("/"+id, smp)
	if s := stats(); s.Cpu.UsageNanoCores == nil || s.Cpu.UsageNanoCores.Value == 0 {
		t.Errorf("usage_nano_cores at the second sample: %v", s.Cpu)
	}

	// v2: the unified keys, swap alone, "max" as no limit.
	st := cgroups.NewStats()
	st.MemoryStats.Usage = cgroups.MemoryData{Usage: 50 << 20, Limit: ^uint64(0)}
	st.MemoryStats.SwapOnlyUsage = cgroups.MemoryData{Usage: 1 << 20, Limit: ^uint64(0)}
	st.MemoryStats.Stats = map[string]uint64{"inactive_file": 20 << 20, "anon": 25 << 20, "pgfault": 9, "total_rss": 999}
	st.CpuStats.PSI = &cgroups.PSIStats{Some: cgroups.PSIData{Avg10: 2.5, Total: 40}}
	st.BlkioStats.PSI = &cgroups.PSIStats{Full: cgroups.PSIData{Total: 3}}
	cg.set("/"+id, cgroupSample{Stats: st, V2: true})
	s = stats()
	// Pressure: totals in ns (the kernel's µs); none for memory here.
	if s.Cpu.Psi.GetSome().GetAvg10() != 2.5 || s.Cpu.Psi.GetSome().GetTotal() != 40000 || s.Memory.Psi != nil || s.Io.GetPsi().GetFull().GetTotal() != 3000 {
		t.Errorf("v2 pressure: cpu %v memory %v io %v", s.Cpu.Psi, s.Memory.Psi, s.Io)
	}
	if m := s.Memory; m.WorkingSetBytes.GetValue() != 30<<20 || m.RssBytes.GetValue() != 25<<20 || m.PageFaults.GetValue() != 9 || m.AvailableBytes != nil {
		t.Errorf("v2 memory: %v", m)
	}
	if s.Swap.GetSwapUsageBytes().GetValue() != 1<<20 || s.Swap.SwapAvailableBytes != nil {
		t.Errorf("v2 swap: %v", s.Swap)
	}
	// v1 without swap accounting (no memsw files): no swap figure.
	smp = v1Sample(1, 1, 1, 0, 0, 0, 1)
	smp.MemoryStats.SwapUsage = cgroups.MemoryData{}
	cg.set("/"+id, smp)
	if s := stats(); s.Swap != nil {
		t.Errorf("swap without accounting: %v", s.Swap)
	}
}

// TestStoppedContainerStats: an exited container answers its attributes
// (and writable layer), no usage; its cgroup is not read. A removed one
// is NotFound.
func TestStoppedContainerStats(t *testing.T) {
	e, cg := statsEnv(t)
	pod := e.runPod("p")
	id := e.runCtr(pod, "a")
	cg.set("/"+id, v1Sample(1, 1, 1, 0, 0, 0, 1))
	e.loop.exitProcess(id, "init", 0)
	r, err := e.srv.ContainerStats(context.Background(), &runtimeapi.ContainerStatsRequest{ContainerId: id})
	if err != nil || r.Stats.Cpu != nil || r.Stats.Memory != nil || r.Stats.Attributes.Id != id {
		t.Fatalf("stats of an exited container: %v, %v", r, err)
	}
	if cg.reads["/"+id] != 0 {
		t.Errorf("the exited container's cgroup was read")
	}
	if _, err := e.srv.RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	_, err = e.srv.ContainerStats(context.Background(), &runtimeapi.ContainerStatsRequest{ContainerId: id})
	if status.Code(err) != codes.NotFound {
		t.Errorf("stats of a removed container: %v, want NotFound", err)
	}
}

// TestPodStats: a pod with a cgroup_parent is read from that cgroup (the
// pause and containers are under it: their cgroupsPath in their bundles);
// without one, the pause's and running containers' cgroups are summed.
// Network from the pod's namespace (the pause's pid), eth0 its default;
// none for a host-network pod. Process count: the containers'. A pod whose
// pause does not run has its attributes and containers only.
func TestPodStats(t *testing.T) {
	e, cg := statsEnv(t)
	cfg := podConfig("withparent")
	cfg.Linux.CgroupParent = "/kubepods/burstable/poduid1"
	pod := e.runPodWith(cfg)
	a, b := e.runCtr(pod, "a"), e.runCtr(pod, "b")
	for _, id := range []string{pod, a, b} {
		dir := e.srv.containerDir(id)
		if id == pod {
			dir = e.srv.sandboxDir(id)
		}
		p, err := specCgroupsPath(filepath.Join(dir, "bundle", "config.json"))
		if err != nil || path.Dir(p) != cfg.Linux.CgroupParent {
			t.Fatalf("%s: cgroupsPath %q, %v: not under the pod's cgroup_parent", id, p, err)
		}
	}
	cg.set(cfg.Linux.CgroupParent, v1Sample(9e9, 300<<20, 1<<30, 100<<20, 150<<20, 0, 99))
	cg.set(path.Join(cfg.Linux.CgroupParent, a), v1Sample(1e9, 10<<20, 1<<30, 0, 0, 0, 2))
	cg.set(path.Join(cfg.Linux.CgroupParent, b), v1Sample(2e9, 20<<20, 1<<30, 0, 0, 0, 3))

	host := podConfig("host")
	host.Linux.SecurityContext.NamespaceOptions.Network = runtimeapi.NamespaceMode_NODE
	hostPod := e.runPodWith(host)
	c := e.runCtr(hostPod, "c")
	cg.set("/"+hostPod, v1Sample(1e9, 1<<20, 0, 0, 1<<20, 0, 1))
	cg.set("/"+c, v1Sample(2e9, 2<<20, 0, 0, 2<<20, 0, 4))

	r, err := e.srv.ListPodSandboxStats(context.Background(), &runtimeapi.ListPodSandboxStatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*runtimeapi.PodSandboxStats{}
	for _, s := range r.Stats {
		got[s.Attributes.Id] = s
	}
	l := got[pod].Linux
	if l.Cpu.GetUsageCoreNanoSeconds().GetValue() != 9e9 || l.Memory.GetWorkingSetBytes().GetValue() != 200<<20 || l.Process.GetProcessCount().GetValue() != 5 {
		t.Errorf("pod with a parent: cpu %v memory %v processes %v", l.Cpu, l.Memory, l.Process)
	}
	if len(l.Containers) != 2 || l.Network.GetDefaultInterface().GetName() != "eth0" || len(l.Network.Interfaces) != 2 ||
		l.Network.DefaultInterface.RxBytes.GetValue() <= 100 || l.Network.DefaultInterface.TxErrors.GetValue() != 2 {
		t.Errorf("pod with a parent: containers %d, network %v", len(l.Containers), l.Network)
	}
	l = got[hostPod].Linux
	if l.Cpu.GetUsageCoreNanoSeconds().GetValue() != 3e9 || l.Memory.GetUsageBytes().GetValue() != 3<<20 || l.Memory.GetRssBytes().GetValue() != 3<<20 ||
		l.Process.GetProcessCount().GetValue() != 4 || l.Network != nil {
		t.Errorf("host-network pod without a parent: cpu %v memory %v processes %v network %v", l.Cpu, l.Memory, l.Process, l.Network)
	}

	// The pod's cgroup gone: no pod usage, the containers still there.
	delete(cg.smp, cfg.Linux.CgroupParent)
	ps, err := e.srv.PodSandboxStats(context.Background(), &runtimeapi.PodSandboxStatsRequest{PodSandboxId: pod})
	if err != nil || ps.Stats.Linux.Cpu != nil || len(ps.Stats.Linux.Containers) != 2 || ps.Stats.Linux.Containers[0].Cpu == nil {
		t.Errorf("pod cgroup gone: %v, %v", ps, err)
	}
	// Stopped: attributes and containers, nothing read.
	if _, err := e.srv.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: hostPod}); err != nil {
		t.Fatal(err)
	}
	ps, err = e.srv.PodSandboxStats(context.Background(), &runtimeapi.PodSandboxStatsRequest{PodSandboxId: hostPod})
	if err != nil || ps.Stats.Linux.Cpu != nil || ps.Stats.Linux.Process != nil || len(ps.Stats.Linux.Containers) != 1 {
		t.Errorf("stopped pod: %v, %v", ps, err)
	}
}

// fakeLayers is a store whose upper dirs are under a temp dir.
type fakeLayers struct{ dir string }

func (f fakeLayers) UpperDir(id string) (string, error) { return filepath.Join(f.dir, id), nil }
func (f fakeLayers) FsInfo() (image.FsUsage, error) {
	return image.FsUsage{Mountpoint: "/mnt/images"}, nil
}

// TestLayerCache: a measure is reused for layerMaxAge, then a new walk
// runs; a caller waits for a walk only until its deadline, then answers
// the last measure (none before the first); walks run off the caller.
func TestLayerCache(t *testing.T) {
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	release := make(chan struct{})
	walks := make(chan string, 10)
	size := uint64(0)
	c := &layerCache{store: fakeLayers{t.TempDir()}, now: clock, sem: make(chan struct{}, layerWalkers), m: map[string]*layerEntry{},
		walk: func(dir string) (layerUsage, error) {
			walks <- dir
			<-release
			mu.Lock()
			defer mu.Unlock()
			size += 100
			return layerUsage{bytes: size, inodes: 1, at: now}, nil
		}}
	// The first call: the walk does not end by the deadline: no measure.
	if _, ok := c.get("a", time.Now().Add(10*time.Millisecond)); ok {
		t.Fatal("a measure before any walk ended")
	}
	<-walks
	release <- struct{}{}
	// The walk ended: the next call has it without a new walk.
	u, ok := c.get("a", time.Now().Add(time.Minute))
	if !ok || u.bytes != 100 {
		t.Fatalf("after the walk: %v %v", u, ok)
	}
	advance(layerMaxAge / 2)
	if u, _ := c.get("a", time.Now()); u.bytes != 100 || len(walks) != 0 {
		t.Fatalf("within layerMaxAge: %v, walks %d", u, len(walks))
	}
	// Too old: a new walk; a caller gives up at its deadline with the
	// last measure, one that waits longer gets the new one.
	advance(layerMaxAge)
	if u, ok := c.get("a", time.Now().Add(10*time.Millisecond)); !ok || u.bytes != 100 {
		t.Fatalf("stale while walking: %v %v", u, ok)
	}
	<-walks
	done := make(chan layerUsage)
	go func() { u, _ := c.get("a", time.Now().Add(time.Minute)); done <- u }()
	release <- struct{}{}
	if u := <-done; u.bytes != 200 {
		t.Fatalf("after the second walk: %v", u)
	}
	if len(walks) != 0 {
		t.Fatalf("%d more walks", len(walks))
	}
}

// TestWalkUsage: du of a dir: every file, dir and link once, a hard
// linked file once.
func TestWalkUsage(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 64<<10)
	if err := os.WriteFile(filepath.Join(dir, "a", "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, "a", "f"), filepath.Join(dir, "a", "b", "hard")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/nowhere", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	u, err := walkUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	// dir, a, a/b, a/f (its second link not counted), link
	if u.inodes != 5 || u.bytes < 64<<10 || u.bytes > 64<<10+64<<10 {
		t.Errorf("usage %+v, want 5 inodes and about 64 KiB plus the dirs", u)
	}
	if _, err := walkUsage(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Errorf("a missing dir: %v, want not exist", err)
	}
}

// TestWritableLayerInStats: ContainerStats carries the upper dir's usage
// on the image store's filesystem, running or not.
func TestWritableLayerInStats(t *testing.T) {
	e, _ := statsEnv(t)
	up := t.TempDir()
	e.srv.stats.layers = &layerCache{store: fakeLayers{up}, walk: walkUsage, now: time.Now, sem: make(chan struct{}, layerWalkers), m: map[string]*layerEntry{}}
	pod := e.runPod("p")
	id := e.runCtr(pod, "a")
	if err := os.MkdirAll(filepath.Join(up, id), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(up, id, "written"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	e.loop.exitProcess(id, "init", 0)
	r, err := e.srv.ContainerStats(context.Background(), &runtimeapi.ContainerStatsRequest{ContainerId: id})
	if err != nil {
		t.Fatal(err)
	}
	w := r.Stats.WritableLayer
	if w.GetUsedBytes().GetValue() < 1<<20 || w.GetInodesUsed().GetValue() != 2 || w.GetFsId().GetMountpoint() != "/mnt/images" {
		t.Errorf("writable layer %v, want 1 MiB in 2 inodes on /mnt/images", w)
	}
}

func TestParseNetDev(t *testing.T) {
	in := `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:     140       2    0    0    0     0          0         0      140       2    0    0    0     0       0          0
  eth0: 1000      10    1    2    0     0          0         0     2000      20    3    4    0     0       0          0
`
	ifs, err := parseNetDev(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []ifaceCounters{{name: "eth0", rxBytes: 1000, rxPackets: 10, rxErrors: 1, rxDropped: 2, txBytes: 2000, txPackets: 20, txErrors: 3, txDropped: 4}}
	if !slices.Equal(ifs, want) {
		t.Errorf("got %+v, want %+v", ifs, want)
	}
	if _, err := parseNetDev(strings.NewReader("a\nb\n  eth0: 1 2\n")); err == nil {
		t.Error("a short line parsed")
	}
}

// TestPodSandboxMetrics: every metric ListPodSandboxMetrics gives is
// described by ListMetricDescriptors with as many label keys as it has
// values (kubelet drops the others); a running pod gets its network
// metrics and its running containers theirs.
func TestPodSandboxMetrics(t *testing.T) {
	e, cg := statsEnv(t)
	pod := e.runPod("p")
	a := e.runCtr(pod, "a")
	created, err := e.createCtr(context.Background(), pod, "created")
	if err != nil {
		t.Fatal(err)
	}
	cg.set("/"+a, v1Sample(5e9, 10<<20, 1<<30, 0, 1<<20, 0, 2))
	d, err := e.srv.ListMetricDescriptors(context.Background(), &runtimeapi.ListMetricDescriptorsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]int{}
	for _, m := range d.Descriptors {
		keys[m.Name] = len(m.LabelKeys)
	}
	r, err := e.srv.ListPodSandboxMetrics(context.Background(), &runtimeapi.ListPodSandboxMetricsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.PodMetrics) != 1 || len(r.PodMetrics[0].ContainerMetrics) != 1 || r.PodMetrics[0].ContainerMetrics[0].ContainerId != a {
		t.Fatalf("metrics %v: want the pod and its running container (not %s)", r, created)
	}
	check := func(ms []*runtimeapi.Metric) map[string]uint64 {
		out := map[string]uint64{}
		for _, m := range ms {
			n, ok := keys[m.Name]
			if !ok || n != len(m.LabelValues) {
				t.Errorf("metric %s: %d label values, described %v with %d", m.Name, len(m.LabelValues), ok, n)
			}
			out[m.Name+"/"+m.LabelValues[len(m.LabelValues)-1]] = m.Value.GetValue()
		}
		return out
	}
	pm := check(r.PodMetrics[0].Metrics)
	if pm["container_network_receive_bytes_total/eth0"] == 0 {
		t.Errorf("pod metrics: %v", pm)
	}
	cm := check(r.PodMetrics[0].ContainerMetrics[0].Metrics)
	if cm["container_cpu_usage_seconds_total/"+testImage] != 5 || cm["container_processes/"+testImage] != 2 {
		t.Errorf("container metrics: %v", cm)
	}
}

// TestReadCgroupFiles: the files a read takes, v1 and v2, on fake cgroup
// dirs: the figures land where the conversions look, the metrics-only ones
// only for the metrics, and an optional file missing (no swap accounting,
// no memory.peak) is no error.
func TestReadCgroupFiles(t *testing.T) {
	cgroups.TestMode = true // files in a temp dir, not on cgroupfs
	t.Cleanup(func() { cgroups.TestMode = false })
	write := func(dir string, files map[string]string) string {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	root := t.TempDir()
	d := cgroupDirs{
		cpuacct: write(filepath.Join(root, "cpuacct"), map[string]string{"cpuacct.usage": "5000\n", "cpuacct.stat": "user 3\nsystem 1\n"}),
		cpu:     write(filepath.Join(root, "cpu"), map[string]string{"cpu.stat": "nr_periods 4\nnr_throttled 2\nthrottled_time 7\n"}),
		memory: write(filepath.Join(root, "memory"), map[string]string{"memory.stat": "cache 10\ntotal_inactive_file 20\ntotal_rss 30\n",
			"memory.usage_in_bytes": "100\n", "memory.limit_in_bytes": "9223372036854771712\n", "memory.max_usage_in_bytes": "150\n",
			"memory.failcnt": "3\n", "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"}),
		pids: write(filepath.Join(root, "pids"), map[string]string{"pids.current": "6\n"}),
	}
	if !d.exists() {
		t.Fatal("the memory dir exists")
	}
	smp := cgroupSample{Stats: cgroups.NewStats()}
	if err := readV1(d, containerCgroups, &smp); err != nil {
		t.Fatal(err)
	}
	if smp.CpuStats.CpuUsage.TotalUsage != 5000 || smp.MemoryStats.Usage.Usage != 100 || !unlimited(smp.MemoryStats.Usage.Limit) ||
		workingSet(smp) != 80 || memStat(smp, "total_rss", "anon") != 30 || smp.PidsStats.Current != 6 {
		t.Errorf("v1: %+v", smp.Stats)
	}
	if _, _, ok := swapBytes(smp); ok || smp.CpuStats.CpuUsage.UsageInUsermode != 0 || smp.OOMKills != 0 {
		t.Errorf("v1 without swap accounting, not for metrics: swap %v, user %d, ooms %d", ok, smp.CpuStats.CpuUsage.UsageInUsermode, smp.OOMKills)
	}
	smp = cgroupSample{Stats: cgroups.NewStats()}
	if err := readV1(d, containerCgroups|forMetrics, &smp); err != nil {
		t.Fatal(err)
	}
	if smp.CpuStats.CpuUsage.UsageInUsermode != 3e7 || smp.CpuStats.CpuUsage.UsageInKernelmode != 1e7 || smp.CpuStats.ThrottlingData.ThrottledPeriods != 2 ||
		smp.MemoryStats.Usage.MaxUsage != 150 || smp.MemoryStats.Usage.Failcnt != 3 || smp.OOMKills != 2 {
		t.Errorf("v1 for metrics: %+v, ooms %d", smp.Stats, smp.OOMKills)
	}
	os.RemoveAll(d.memory)
	if d.exists() {
		t.Error("a cgroup whose memory dir is gone exists")
	}

	v2 := write(filepath.Join(root, "unified"), map[string]string{
		"cpu.stat":    "usage_usec 5\nuser_usec 3\nsystem_usec 2\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n",
		"memory.stat": "file 10\ninactive_file 20\nanon 30\n", "memory.current": "100\n", "memory.max": "max\n",
		"memory.swap.current": "4\n", "memory.swap.max": "max\n", "memory.events": "low 0\nhigh 0\nmax 0\noom 1\noom_kill 1\n", "pids.current": "2\n",
		"cpu.pressure":    "some avg10=1.50 avg60=0.25 avg300=0.00 total=700\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=9\n",
		"memory.pressure": "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
		"io.pressure":     "garbage\n"})
	smp = cgroupSample{Stats: cgroups.NewStats(), V2: true}
	if err := readV2(v2, containerCgroups|forMetrics, &smp); err != nil {
		t.Fatal(err)
	}
	if p := smp.CpuStats.PSI; p == nil || p.Some.Avg10 != 1.5 || p.Some.Avg60 != 0.25 || p.Some.Total != 700 || p.Full.Total != 9 {
		t.Errorf("v2 cpu pressure: %+v", p)
	}
	if smp.MemoryStats.PSI == nil || smp.BlkioStats.PSI != nil {
		t.Errorf("v2 pressure: memory %+v, io (unparsable) %+v", smp.MemoryStats.PSI, smp.BlkioStats.PSI)
	}
	if smp.CpuStats.CpuUsage.TotalUsage != 5000 || workingSet(smp) != 80 || memStat(smp, "total_rss", "anon") != 30 ||
		!unlimited(smp.MemoryStats.Usage.Limit) || smp.PidsStats.Current != 2 || smp.OOMKills != 1 {
		t.Errorf("v2: %+v", smp.Stats)
	}
	if u, l, ok := swapBytes(smp); !ok || u != 4 || !unlimited(l) {
		t.Errorf("v2 swap: %d %d %v", u, l, ok)
	}
	// A v2 cgroup without the memory and pids controllers enabled.
	bare := write(filepath.Join(root, "bare"), map[string]string{"cpu.stat": "usage_usec 1\n"})
	smp = cgroupSample{Stats: cgroups.NewStats(), V2: true}
	if err := readV2(bare, containerCgroups, &smp); err != nil || smp.CpuStats.CpuUsage.TotalUsage != 1000 || smp.CpuStats.PSI != nil {
		t.Errorf("v2 without memory and pids: %v %+v", err, smp.Stats)
	}
}
