package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/cri/ocispec"
	"github.com/evjournal/containerd/image"
	"github.com/evjournal/containerd/podnet"
	"github.com/evjournal/containerd/supervisor"
	"github.com/evjournal/containerd/supervisor/journal"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// sandbox is one pod: its record and its decoded config. Guarded by
// Server.mu.
type sandbox struct {
	rec sandboxRecord
	cfg *runtimeapi.PodSandboxConfig
}

// pauseInRootfs is where the pause binary is bound in a sandbox's rootfs.
const pauseInRootfs = "/pause"

// podShmSize is the size of a pod's /dev/shm tmpfs, as kubelet's default.
const podShmSize = 64 << 20

// stopWait bounds the wait for a killed process's exit event.
const stopWait = 30 * time.Second

// RunPodSandbox makes the pod's network namespace (CNI), its /dev/shm and
// files (hostname, resolv.conf, hosts), and runs its pause process as a
// container of the supervisor. On failure everything made is undone.
func (s *Server) RunPodSandbox(ctx context.Context, r *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	cfg := r.GetConfig()
	if cfg.GetMetadata().GetName() == "" {
		return nil, toStatus(fmt.Errorf("sandbox config: metadata.name is required: %w", errdefs.ErrInvalidArgument))
	}
	if h := r.GetRuntimeHandler(); h != "" && h != "runc" {
		return nil, toStatus(fmt.Errorf("runtime handler %q: only the default (\"\" or \"runc\") is served: %w", h, errdefs.ErrNotFound))
	}
	if err := s.reserveSandboxName(cfg.GetMetadata()); err != nil {
		return nil, toStatus(err)
	}
	id := newID()
	sb, err := s.runSandbox(ctx, id, cfg)
	if err != nil {
		return nil, toStatus(err)
	}
	s.mu.Lock()
	s.sandboxes[id] = sb
	s.mu.Unlock()
	s.broadcastSandbox(sb, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
}

// reserveSandboxName refuses a second live pod with the same metadata (name,
// namespace, uid, attempt), as kubelet expects of a runtime.
func (s *Server) reserveSandboxName(m *runtimeapi.PodSandboxMetadata) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sb := range s.sandboxes {
		o := sb.cfg.GetMetadata()
		if o.GetName() == m.GetName() && o.GetNamespace() == m.GetNamespace() && o.GetUid() == m.GetUid() && o.GetAttempt() == m.GetAttempt() {
			return fmt.Errorf("sandbox %s/%s (uid %s, attempt %d) exists already as %s: %w",
				m.GetNamespace(), m.GetName(), m.GetUid(), m.GetAttempt(), sb.rec.ID, errdefs.ErrAlreadyExists)
		}
	}
	return nil
}

// undoList runs its steps in reverse order unless disarmed.
type undoList []func()

func (u *undoList) add(f func()) { *u = append(*u, f) }
func (u *undoList) run() {
	for i := len(*u) - 1; i >= 0; i-- {
		(*u)[i]()
	}
}

func (s *Server) runSandbox(ctx context.Context, id string, cfg *runtimeapi.PodSandboxConfig) (sb *sandbox, err error) {
	var undo undoList
	defer func() {
		if err != nil {
			undo.run()
		}
	}()
	raw, err := marshalProto(cfg)
	if err != nil {
		return nil, fmt.Errorf("sandbox config: %w", err)
	}
	if fi, err := os.Stat(s.cfg.Pause); s.cfg.SandboxImage == "" && (err != nil || !fi.Mode().IsRegular()) {
		return nil, fmt.Errorf("the sandboxes' pause binary %s is missing (--sandbox-pause): %w", s.cfg.Pause, errdefs.ErrFailedPrecondition)
	}
	userNS, err := ocispec.PodUserNS(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, errdefs.ErrInvalidArgument)
	}
	dir := s.sandboxDir(id)
	rootfs := filepath.Join(dir, "bundle", "rootfs")
	if err := os.MkdirAll(rootfs, 0o755); err != nil {
		return nil, err
	}
	undo.add(func() { os.RemoveAll(dir) })
	pauseArgs := []string{pauseInRootfs}
	if s.cfg.SandboxImage != "" {
		rootfs, pauseArgs, err = s.sandboxImageRootfs(ctx, id, userNS)
		if err != nil {
			return nil, err
		}
		undo.add(func() { s.cfg.Images.RemoveRootfs(id) })
	}
	if userNS != nil {
		if err := searchableFromUserNS(s.dataRoot(), rootfs); err != nil {
			return nil, err
		}
		// runc makes the mountpoints (/proc, /dev, /pause...) in the empty
		// rootfs from inside the namespace: its root must own it (an
		// image's rootfs has its upper dir given to that root instead).
		if s.cfg.SandboxImage == "" {
			if err := os.Chown(rootfs, int(userNS.HostRootUID()), int(userNS.HostRootGID())); err != nil {
				return nil, err
			}
		}
	}
	rec := sandboxRecord{ID: id, Config: raw, CreatedAt: time.Now().UnixNano(), State: sandboxNotReady}

	nsOpts := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	podNet := nsOpts.GetNetwork() != runtimeapi.NamespaceMode_NODE
	specNetNS := ""
	switch {
	case podNet && userNS == nil:
		ips, netns, err := s.setupNetwork(ctx, id, cfg, 0, &undo)
		if err != nil {
			return nil, err
		}
		rec.NetNS, rec.IPs, specNetNS = netns, ips, netns
	case podNet:
		// The pause makes the namespace inside the user namespace; it is
		// pinned here, and plugged into CNI, once the pause runs. The
		// record names the pin before, so that a stop after a crash in
		// between still tears it down.
		if s.cfg.Network == nil {
			return nil, errNoNetwork
		}
		rec.NetNS = filepath.Join(s.cfg.StateDir, "netns", id)
	}
	if nsOpts.GetIpc() != runtimeapi.NamespaceMode_NODE {
		shm, err := mountShm(filepath.Join(s.cfg.StateDir, "shm", id))
		if err != nil {
			return nil, err
		}
		undo.add(func() { unmountShm(shm) })
		rec.Shm = shm
	}
	files, err := writePodFiles(dir, cfg, rec.IPs)
	if err != nil {
		return nil, err
	}
	spec, err := ocispec.Sandbox(cfg, ocispec.SandboxParams{
		ID: id, PauseArgs: pauseArgs, RootfsPath: rootfs, NetNSPath: specNetNS,
		ResolvConfPath: files.resolvConf, HostnamePath: files.hostname, HostsPath: files.hosts, ShmPath: rec.Shm,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, errdefs.ErrInvalidArgument) // ocispec names the field
	}
	if s.cfg.SandboxImage == "" {
		spec.Mounts = append(spec.Mounts, specs.Mount{Destination: pauseInRootfs, Type: "bind", Source: s.cfg.Pause, Options: []string{"rbind", "ro"}})
	} else if userNS != nil {
		if err := makeMountpoints(rootfs, spec); err != nil {
			return nil, err
		}
	}
	if err := writeBundle(filepath.Join(dir, "bundle"), spec); err != nil {
		return nil, err
	}
	if err := writeRecord(dir, "sandbox.json", &rec); err != nil {
		return nil, err
	}
	info, err := s.sup.CreateContainer(ctx, supervisor.CreateRequest{
		ID: id, Bundle: filepath.Join(dir, "bundle"), Labels: sandboxLabels(cfg),
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: start the pause process: %w", id, err)
	}
	rec.State, rec.Pid = sandboxReady, initPid(info)
	if podNet && userNS != nil {
		undo.add(func() { s.killPause(id) })
		ips, _, err := s.setupNetwork(ctx, id, cfg, rec.Pid, &undo)
		if err != nil {
			return nil, err
		}
		rec.IPs = ips
		// Rewritten in place: the pause has /etc/hosts bound already.
		if _, err := writePodFiles(dir, cfg, rec.IPs); err != nil {
			return nil, err
		}
	}
	if err := writeRecord(dir, "sandbox.json", &rec); err != nil {
		s.sup.Signal(context.WithoutCancel(ctx), id, "init", syscall.SIGKILL)
		return nil, err
	}
	return &sandbox{rec: rec, cfg: cfg}, nil
}

var errNoNetwork = fmt.Errorf("pod network: no CNI network is configured (only host-network pods can run): %w", errdefs.ErrFailedPrecondition)

// setupNetwork pins the pod's network namespace (a new one, or with
// pausePid the one the pause process made) and plugs it into the CNI
// network.
func (s *Server) setupNetwork(ctx context.Context, id string, cfg *runtimeapi.PodSandboxConfig, pausePid int, undo *undoList) ([]string, string, error) {
	if s.cfg.Network == nil {
		return nil, "", errNoNetwork
	}
	var ns *podnet.NetNS
	var err error
	if pausePid > 0 {
		ns, err = podnet.PinNetNS(filepath.Join(s.cfg.StateDir, "netns"), id, pausePid)
	} else {
		ns, err = podnet.NewNetNS(filepath.Join(s.cfg.StateDir, "netns"), id)
	}
	if err != nil {
		return nil, "", fmt.Errorf("pod network namespace: %w", err)
	}
	undo.add(func() { ns.Remove() })
	md := cfg.GetMetadata()
	opts := podnet.SetupOptions{Namespace: md.GetNamespace(), Name: md.GetName(), UID: md.GetUid(), Annotations: cfg.GetAnnotations()}
	for _, pm := range cfg.GetPortMappings() {
		opts.PortMappings = append(opts.PortMappings, podnet.PortMapping{
			HostPort: pm.GetHostPort(), ContainerPort: pm.GetContainerPort(), Protocol: pm.GetProtocol().String(), HostIP: pm.GetHostIp(),
		})
	}
	res, err := s.cfg.Network.Setup(ctx, id, ns.Path(), opts)
	if err != nil {
		return nil, "", fmt.Errorf("pod network: %w", err)
	}
	undo.add(func() { s.cfg.Network.Teardown(context.Background(), id, ns.Path()) })
	var ips []string
	for _, ip := range res.IPs {
		ips = append(ips, ip.String())
	}
	return ips, ns.Path(), nil
}

func sandboxLabels(cfg *runtimeapi.PodSandboxConfig) []string {
	md := cfg.GetMetadata()
	return []string{"io.kubernetes.cri.kind=sandbox", "io.kubernetes.pod.name=" + md.GetName(), "io.kubernetes.pod.namespace=" + md.GetNamespace()}
}

func initPid(info supervisor.ContainerInfo) int {
	for _, p := range info.Processes {
		if p.ID == "init" {
			return p.SystemPid
		}
	}
	return 0
}

// mountShm mounts a pod's /dev/shm: a tmpfs on the host that the sandbox and
// its containers bind.
func mountShm(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := unix.Mount("shm", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, fmt.Sprintf("mode=1777,size=%d", podShmSize)); err != nil {
		os.Remove(dir)
		return "", fmt.Errorf("mount the pod's /dev/shm at %s: %w", dir, err)
	}
	return dir, nil
}

func unmountShm(dir string) error {
	if dir == "" {
		return nil
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

type podFiles struct{ hostname, resolvConf, hosts string }

// writePodFiles writes the pod's /etc/hostname, /etc/resolv.conf (from the
// config's DNS settings, else the host's) and /etc/hosts.
func writePodFiles(dir string, cfg *runtimeapi.PodSandboxConfig, ips []string) (podFiles, error) {
	f := podFiles{hostname: filepath.Join(dir, "hostname"), resolvConf: filepath.Join(dir, "resolv.conf"), hosts: filepath.Join(dir, "hosts")}
	hostname := cfg.GetHostname()
	if hostname == "" {
		hostname, _ = os.Hostname()
	}
	hosts := "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
	if len(ips) > 0 {
		hosts += ips[0] + "\t" + hostname + "\n"
	}
	resolv, err := resolvConf(cfg.GetDnsConfig())
	if err != nil {
		return f, err
	}
	for _, w := range []struct{ path, data string }{{f.hostname, hostname + "\n"}, {f.resolvConf, resolv}, {f.hosts, hosts}} {
		if err := os.WriteFile(w.path, []byte(w.data), 0o644); err != nil {
			return f, err
		}
	}
	return f, nil
}

func resolvConf(dns *runtimeapi.DNSConfig) (string, error) {
	if dns == nil || (len(dns.GetServers()) == 0 && len(dns.GetSearches()) == 0 && len(dns.GetOptions()) == 0) {
		data, err := os.ReadFile("/etc/resolv.conf")
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		return string(data), err
	}
	var b strings.Builder
	for _, s := range dns.GetServers() {
		b.WriteString("nameserver " + s + "\n")
	}
	if len(dns.GetSearches()) > 0 {
		b.WriteString("search " + strings.Join(dns.GetSearches(), " ") + "\n")
	}
	if len(dns.GetOptions()) > 0 {
		b.WriteString("options " + strings.Join(dns.GetOptions(), " ") + "\n")
	}
	return b.String(), nil
}

func writeBundle(dir string, spec *specs.Spec) error {
	data, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.json"), data, 0o600)
}

// StopPodSandbox stops the pod's containers and its pause process and tears
// its network down. Stopping a stopped pod is not an error.
func (s *Server) StopPodSandbox(ctx context.Context, r *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	id := r.GetPodSandboxId()
	sb, err := s.getSandbox(id)
	if errdefs.IsNotFound(err) {
		return &runtimeapi.StopPodSandboxResponse{}, nil // CRI: nothing left to stop is success
	}
	if err != nil {
		return nil, toStatus(err)
	}
	id = sb.rec.ID // the request may name a unique prefix
	for _, c := range s.containersOf(id) {
		if err := s.stopContainer(ctx, c, 0); err != nil {
			return nil, toStatus(err)
		}
	}
	if err := s.stopSandbox(ctx, sb); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

// killPause kills a pause process that RunPodSandbox started but could
// not finish setting up, and waits for its exit.
func (s *Server) killPause(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), stopWait)
	defer cancel()
	s.mu.Lock()
	w := s.waitLocked(id, "init")
	s.mu.Unlock()
	if err := s.sup.Signal(ctx, id, "init", syscall.SIGKILL); err != nil {
		s.unwait(id, "init", w)
		s.log.WithError(err).WithField("sandbox", id).Warn("kill the pause process of a pod that failed to start")
		return
	}
	if _, err := awaitExit(ctx, w, stopWait); err != nil {
		s.unwait(id, "init", w)
		s.log.WithError(err).WithField("sandbox", id).Warn("the pause process of a pod that failed to start did not exit")
	}
}

func (s *Server) stopSandbox(ctx context.Context, sb *sandbox) error {
	s.mu.Lock()
	id, ready := sb.rec.ID, sb.rec.State == sandboxReady
	s.mu.Unlock()
	// A pod whose daemon died inside RunPodSandbox may have a pause
	// process running under a record that still says not ready.
	ready = ready || s.running(ctx, id)
	s.mu.Lock()
	var w chan exitInfo
	if ready {
		w = s.waitLocked(id, "init")
	}
	s.mu.Unlock()
	if ready {
		if err := s.sup.Signal(ctx, id, "init", syscall.SIGKILL); err != nil && !errdefs.IsNotFound(err) && !errors.Is(err, syscall.ESRCH) {
			s.unwait(id, "init", w)
			return fmt.Errorf("sandbox %s: kill the pause process: %w", id, err)
		}
		if _, err := awaitExit(ctx, w, stopWait); err != nil {
			s.unwait(id, "init", w)
			return fmt.Errorf("sandbox %s: %w", id, err)
		}
	}
	if s.running(ctx, id) {
		return fmt.Errorf("sandbox %s: the pause process still runs: %w", id, errdefs.ErrFailedPrecondition)
	}
	s.mu.Lock()
	rec := sb.rec
	s.mu.Unlock()
	if rec.NetNS != "" && !rec.NetworkDown {
		if s.cfg.Network != nil {
			if err := s.cfg.Network.Teardown(ctx, id, rec.NetNS); err != nil {
				return fmt.Errorf("sandbox %s: tear the network down: %w", id, err)
			}
		}
		if err := podnet.RemoveNetNS(rec.NetNS); err != nil {
			return fmt.Errorf("sandbox %s: %w", id, err)
		}
		rec.NetworkDown = true
	}
	rec.State, rec.Pid = sandboxNotReady, 0
	s.mu.Lock()
	sb.rec = rec
	s.mu.Unlock()
	if err := writeRecord(s.sandboxDir(id), "sandbox.json", &rec); err != nil {
		return err
	}
	s.broadcastSandbox(sb, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
	return nil
}

// running says whether the supervisor runs a container of this id.
func (s *Server) running(ctx context.Context, id string) bool {
	infos, err := s.sup.State(ctx, id)
	return err == nil && len(infos) == 1 && infos[0].Status != supervisor.StatusStopped
}

// RemovePodSandbox stops the pod if needed, removes its containers and all
// it made. Removing an unknown pod is not an error (CRI: idempotent).
func (s *Server) RemovePodSandbox(ctx context.Context, r *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	id := r.GetPodSandboxId()
	sb, err := s.getSandbox(id)
	if errdefs.IsNotFound(err) {
		return &runtimeapi.RemovePodSandboxResponse{}, nil
	}
	if err != nil {
		return nil, toStatus(err)
	}
	id = sb.rec.ID // the request may name a unique prefix
	for _, c := range s.containersOf(id) {
		if err := s.removeContainer(ctx, c); err != nil {
			return nil, toStatus(err)
		}
	}
	if err := s.stopSandbox(ctx, sb); err != nil {
		return nil, toStatus(err)
	}
	if err := s.sup.Note(ctx, journal.TypeCRIDeleted, id); err != nil {
		return nil, toStatus(fmt.Errorf("sandbox %s: %w", id, err))
	}
	if err := unmountShm(sb.rec.Shm); err != nil {
		return nil, toStatus(fmt.Errorf("sandbox %s: %w", id, err))
	}
	// The rootfs of a sandbox run from --sandbox-image (none otherwise:
	// removing an unknown rootfs is a no-op, whatever the flag is today).
	if err := s.cfg.Images.RemoveRootfs(id); err != nil {
		return nil, toStatus(fmt.Errorf("sandbox %s: %w", id, err))
	}
	if err := os.RemoveAll(s.sandboxDir(id)); err != nil {
		return nil, toStatus(fmt.Errorf("sandbox %s: %w", id, err))
	}
	s.mu.Lock()
	delete(s.sandboxes, id)
	s.mu.Unlock()
	s.broadcastSandbox(sb, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT)
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

func (s *Server) getSandbox(id string) (*sandbox, error) {
	if id == "" {
		return nil, fmt.Errorf("pod sandbox id is empty: %w", errdefs.ErrInvalidArgument)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb, ok := s.sandboxes[id]; ok {
		return sb, nil
	}
	for full, sb := range s.sandboxes { // a unique prefix, as crictl allows
		if strings.HasPrefix(full, id) && len(id) >= 8 {
			return sb, nil
		}
	}
	return nil, fmt.Errorf("pod sandbox %q: %w", id, errdefs.ErrNotFound)
}

func (s *Server) PodSandboxStatus(ctx context.Context, r *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	sb, err := s.getSandbox(r.GetPodSandboxId())
	if err != nil {
		return nil, toStatus(err)
	}
	s.mu.Lock()
	st := sandboxStatus(sb)
	var cs []*runtimeapi.ContainerStatus
	for _, c := range s.containers {
		if c.rec.SandboxID == sb.rec.ID {
			cs = append(cs, containerStatus(c))
		}
	}
	s.mu.Unlock()
	// Newest first: kubelet with EventedPLEG takes this list as the pod's
	// container statuses without sorting it, and its first status of a
	// name is what it takes for that container's latest attempt. In map
	// order an older, exited attempt could come first: kubelet then asked
	// to create an attempt that existed (AlreadyExists) and did not restart
	// the container (kubelet-e2e with KUBELET_FEATURE_GATES=EventedPLEG=true).
	slices.SortStableFunc(cs, func(a, b *runtimeapi.ContainerStatus) int { return cmp.Compare(b.CreatedAt, a.CreatedAt) })
	return &runtimeapi.PodSandboxStatusResponse{Status: st, ContainersStatuses: cs, Timestamp: time.Now().UnixNano()}, nil
}

// sandboxStatus builds the CRI status. Call with s.mu held.
func sandboxStatus(sb *sandbox) *runtimeapi.PodSandboxStatus {
	st := &runtimeapi.PodSandboxStatus{
		Id: sb.rec.ID, Metadata: sb.cfg.GetMetadata(), State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY,
		CreatedAt: sb.rec.CreatedAt, Labels: sb.cfg.GetLabels(), Annotations: sb.cfg.GetAnnotations(),
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: sb.cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()}},
	}
	if sb.rec.State == sandboxReady {
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

func (s *Server) ListPodSandbox(ctx context.Context, r *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	f := r.GetFilter()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*runtimeapi.PodSandbox
	for _, sb := range s.sandboxes {
		st := sandboxStatus(sb)
		if !sb.matches(f.GetId(), f.GetLabelSelector()) || f.GetState() != nil && f.GetState().GetState() != st.State {
			continue
		}
		out = append(out, &runtimeapi.PodSandbox{Id: st.Id, Metadata: st.Metadata, State: st.State, CreatedAt: st.CreatedAt,
			Labels: st.Labels, Annotations: st.Annotations})
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

// sandboxImageRootfs prepares the sandbox's rootfs from --sandbox-image,
// pulling the image the first time (through the configured mirrors), and
// returns it with the process's argv (the image's entrypoint and cmd).
// With a user namespace the rootfs's upper dir belongs to the pod's root,
// so that runc can make the mountpoints the image lacks from inside; the
// image's own files are not id-mapped (the namespace does not exist yet).
func (s *Server) sandboxImageRootfs(ctx context.Context, id string, userNS *ocispec.UserNS) (string, []string, error) {
	ref := s.cfg.SandboxImage
	img, err := s.cfg.Images.Get(ref)
	if errdefs.IsNotFound(err) {
		s.log.WithField("image", ref).Info("cri: pulling the sandbox image")
		img, err = s.cfg.Images.Pull(ctx, ref, nil)
	}
	if err != nil {
		return "", nil, fmt.Errorf("sandbox image %s (--sandbox-image): %w", ref, err)
	}
	args := append(slices.Clone(img.Config.Entrypoint), img.Config.Cmd...)
	if len(args) == 0 {
		return "", nil, fmt.Errorf("sandbox image %s (--sandbox-image) has neither entrypoint nor cmd: %w", ref, errdefs.ErrFailedPrecondition)
	}
	var owner []image.IDMap
	if userNS != nil {
		owner = append(owner, image.IDMap{RootUID: userNS.HostRootUID(), RootGID: userNS.HostRootGID()})
	}
	rootfs, err := s.cfg.Images.PrepareRootfs(id, img.ID, owner...)
	if err != nil {
		return "", nil, fmt.Errorf("sandbox image %s: rootfs: %w", ref, err)
	}
	return rootfs, args, nil
}
