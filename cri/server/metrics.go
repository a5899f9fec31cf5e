package server

import (
	"context"
	"path/filepath"
	"time"

	"github.com/evjournal/containerd/supervisor/objects"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// kubelet's CRI metrics path (feature gate PodAndContainerStatsFromCRI):
// at its start it asks ListMetricDescriptors once, then serves on
// /metrics/cadvisor whatever ListPodSandboxMetrics returns under those
// names (a metric of a name not described is dropped). The names, label
// keys and units are cAdvisor's, which that endpoint served before, and
// the ones containerd's CRI plugin describes; the CRI carries integer
// values, so seconds are whole seconds (as containerd's).

// Label keys of every metric: the pod's name and namespace, the
// container's name, its id and image ("" for the pod-level ones, whose id
// is the pod's).
var (
	metricLabels    = []string{"pod", "namespace", "container", "id", "image"}
	netMetricLabels = append(append([]string(nil), metricLabels...), "interface")
	fsMetricLabels  = append(append([]string(nil), metricLabels...), "device")
)

type metricDesc struct {
	name, help string
	counter    bool
	labels     []string
}

var metricDescs = []metricDesc{
	{"container_cpu_usage_seconds_total", "Cumulative cpu time consumed in seconds.", true, metricLabels},
	{"container_cpu_user_seconds_total", "Cumulative user cpu time consumed in seconds.", true, metricLabels},
	{"container_cpu_system_seconds_total", "Cumulative system cpu time consumed in seconds.", true, metricLabels},
	{"container_cpu_cfs_periods_total", "Number of elapsed enforcement period intervals.", true, metricLabels},
	{"container_cpu_cfs_throttled_periods_total", "Number of throttled period intervals.", true, metricLabels},
	{"container_cpu_cfs_throttled_seconds_total", "Total time duration the container has been throttled.", true, metricLabels},
	{"container_memory_cache", "Number of bytes of page cache memory.", false, metricLabels},
	{"container_memory_rss", "Size of RSS in bytes.", false, metricLabels},
	{"container_memory_mapped_file", "Size of memory mapped files in bytes.", false, metricLabels},
	{"container_memory_swap", "Container swap usage in bytes.", false, metricLabels},
	{"container_memory_failcnt", "Number of memory usage hits limits.", true, metricLabels},
	{"container_memory_usage_bytes", "Current memory usage in bytes, including all memory regardless of when it was accessed.", false, metricLabels},
	{"container_memory_max_usage_bytes", "Maximum memory usage recorded in bytes.", false, metricLabels},
	{"container_memory_working_set_bytes", "Current working set in bytes.", false, metricLabels},
	{"container_memory_total_active_file_bytes", "Current total active file in bytes.", false, metricLabels},
	{"container_memory_total_inactive_file_bytes", "Current total inactive file in bytes.", false, metricLabels},
	{"container_oom_events_total", "Count of out of memory events observed for the container.", true, metricLabels},
	{"container_processes", "Number of processes running inside the container.", false, metricLabels},
	{"container_spec_memory_limit_bytes", "Memory limit for the container.", false, metricLabels},
	{"container_start_time_seconds", "Start time of the container since unix epoch in seconds.", false, metricLabels},
	{"container_last_seen", "Last time a container was seen by the exporter.", false, metricLabels},
	{"container_fs_usage_bytes", "Number of bytes that are consumed by the container on this filesystem.", false, fsMetricLabels},
	{"container_network_receive_bytes_total", "Cumulative count of bytes received.", true, netMetricLabels},
	{"container_network_receive_packets_total", "Cumulative count of packets received.", true, netMetricLabels},
	{"container_network_receive_packets_dropped_total", "Cumulative count of packets dropped while receiving.", true, netMetricLabels},
	{"container_network_receive_errors_total", "Cumulative count of errors encountered while receiving.", true, netMetricLabels},
	{"container_network_transmit_bytes_total", "Cumulative count of bytes transmitted.", true, netMetricLabels},
	{"container_network_transmit_packets_total", "Cumulative count of packets transmitted.", true, netMetricLabels},
	{"container_network_transmit_packets_dropped_total", "Cumulative count of packets dropped while transmitting.", true, netMetricLabels},
	{"container_network_transmit_errors_total", "Cumulative count of errors encountered while transmitting.", true, netMetricLabels},
}

var metricKinds = func() map[string]bool {
	m := map[string]bool{}
	for _, d := range metricDescs {
		m[d.name] = d.counter
	}
	return m
}()

// ListMetricDescriptors describes every metric ListPodSandboxMetrics gives.
func (s *Server) ListMetricDescriptors(context.Context, *runtimeapi.ListMetricDescriptorsRequest) (*runtimeapi.ListMetricDescriptorsResponse, error) {
	out := &runtimeapi.ListMetricDescriptorsResponse{}
	for _, d := range metricDescs {
		out.Descriptors = append(out.Descriptors, &runtimeapi.MetricDescriptor{Name: d.name, Help: d.help, LabelKeys: d.labels})
	}
	return out, nil
}

// ListPodSandboxMetrics gives, for every pod whose pause runs, the network
// metrics of its namespace and, for each of its running containers, the
// metrics of its cgroup and writable layer. Read as the stats calls read
// (one loop turn, statsWorkers pods at a time); what cannot be read is
// left out and logged, never failing the call.
func (s *Server) ListPodSandboxMetrics(ctx context.Context, _ *runtimeapi.ListPodSandboxMetricsRequest) (*runtimeapi.ListPodSandboxMetricsResponse, error) {
	objs, err := s.objectMap(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	var sbs []*sandbox
	for _, sb := range s.recs.allSandboxes() {
		if objs[sb.rec.ID].State == objects.Running {
			sbs = append(sbs, sb)
		}
	}
	out := &runtimeapi.ListPodSandboxMetricsResponse{PodMetrics: make([]*runtimeapi.PodSandboxMetrics, len(sbs))}
	deadline := time.Now().Add(layerWait)
	parallel(len(sbs), func(i int) { out.PodMetrics[i] = s.podMetrics(sbs[i], objs, deadline) })
	return out, nil
}

// metricSet builds the metrics of one object.
type metricSet struct {
	labels []string
	at     int64
	out    []*runtimeapi.Metric
}

func (m *metricSet) add(name string, v uint64, extra ...string) {
	t := runtimeapi.MetricType_GAUGE
	if metricKinds[name] {
		t = runtimeapi.MetricType_COUNTER
	}
	m.out = append(m.out, &runtimeapi.Metric{Name: name, Timestamp: m.at, MetricType: t,
		LabelValues: append(append([]string(nil), m.labels...), extra...), Value: &runtimeapi.UInt64Value{Value: v}})
}

func (s *Server) podMetrics(sb *sandbox, objs map[string]objects.Object, deadline time.Time) *runtimeapi.PodSandboxMetrics {
	id, meta := sb.rec.ID, sb.cfg.GetMetadata()
	out := &runtimeapi.PodSandboxMetrics{PodSandboxId: id}
	o := objs[id]
	if sb.cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() != runtimeapi.NamespaceMode_NODE && o.Pid > 0 {
		if ifs, err := s.stats.netDev(o.Pid); err != nil {
			s.log.WithError(err).WithField("pod", id).Warn("metrics: cannot read the pod's network counters")
		} else {
			m := &metricSet{labels: []string{meta.GetName(), meta.GetNamespace(), "", id, ""}, at: time.Now().UnixNano()}
			for _, i := range ifs {
				m.add("container_network_receive_bytes_total", i.rxBytes, i.name)
				m.add("container_network_receive_packets_total", i.rxPackets, i.name)
				m.add("container_network_receive_packets_dropped_total", i.rxDropped, i.name)
				m.add("container_network_receive_errors_total", i.rxErrors, i.name)
				m.add("container_network_transmit_bytes_total", i.txBytes, i.name)
				m.add("container_network_transmit_packets_total", i.txPackets, i.name)
				m.add("container_network_transmit_packets_dropped_total", i.txDropped, i.name)
				m.add("container_network_transmit_errors_total", i.txErrors, i.name)
			}
			out.Metrics = m.out
		}
	}
	for _, c := range s.recs.containersOf(id) {
		co := objs[c.rec.ID]
		if co.State != objects.Running {
			continue
		}
		if cm := s.containerMetrics(sb, c, co, deadline); cm != nil {
			out.ContainerMetrics = append(out.ContainerMetrics, cm)
		}
	}
	return out
}

func (s *Server) containerMetrics(sb *sandbox, c *container, o objects.Object, deadline time.Time) *runtimeapi.ContainerMetrics {
	smp, ok := s.readObject(c.rec.ID, filepath.Join(s.containerDir(c.rec.ID), "bundle"), containerCgroups|forMetrics)
	if !ok {
		return nil
	}
	meta := sb.cfg.GetMetadata()
	m := &metricSet{labels: []string{meta.GetName(), meta.GetNamespace(), c.cfg.GetMetadata().GetName(), c.rec.ID, c.cfg.GetImage().GetImage()},
		at: smp.At.UnixNano()}
	cpu := smp.CpuStats
	sec := uint64(time.Second)
	m.add("container_cpu_usage_seconds_total", cpu.CpuUsage.TotalUsage/sec)
	m.add("container_cpu_user_seconds_total", cpu.CpuUsage.UsageInUsermode/sec)
	m.add("container_cpu_system_seconds_total", cpu.CpuUsage.UsageInKernelmode/sec)
	m.add("container_cpu_cfs_periods_total", cpu.ThrottlingData.Periods)
	m.add("container_cpu_cfs_throttled_periods_total", cpu.ThrottlingData.ThrottledPeriods)
	m.add("container_cpu_cfs_throttled_seconds_total", cpu.ThrottlingData.ThrottledTime/sec)
	mem := smp.MemoryStats
	m.add("container_memory_cache", memStat(smp, "total_cache", "file"))
	m.add("container_memory_rss", memStat(smp, "total_rss", "anon"))
	m.add("container_memory_mapped_file", memStat(smp, "total_mapped_file", "file_mapped"))
	if swap, _, ok := swapBytes(smp); ok {
		m.add("container_memory_swap", swap)
	}
	m.add("container_memory_failcnt", mem.Usage.Failcnt)
	m.add("container_memory_usage_bytes", mem.Usage.Usage)
	m.add("container_memory_max_usage_bytes", mem.Usage.MaxUsage)
	m.add("container_memory_working_set_bytes", workingSet(smp))
	m.add("container_memory_total_active_file_bytes", memStat(smp, "total_active_file", "active_file"))
	m.add("container_memory_total_inactive_file_bytes", memStat(smp, "total_inactive_file", "inactive_file"))
	m.add("container_oom_events_total", smp.OOMKills)
	m.add("container_processes", smp.PidsStats.Current)
	if !unlimited(mem.Usage.Limit) {
		m.add("container_spec_memory_limit_bytes", mem.Usage.Limit)
	}
	m.add("container_start_time_seconds", uint64(time.Unix(0, o.StartedAt).Unix()))
	m.add("container_last_seen", uint64(time.Now().Unix()))
	if u, ok := s.stats.layers.get(c.rec.ID, deadline); ok {
		m.add("container_fs_usage_bytes", u.bytes, s.stats.layers.mountpoint())
	}
	return &runtimeapi.ContainerMetrics{ContainerId: c.rec.ID, Metrics: m.out}
}
