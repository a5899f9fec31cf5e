package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/cri/ocispec"
	"github.com/evjournal/containerd/internal/crashpoint"
	"github.com/evjournal/containerd/supervisor"
	"github.com/evjournal/containerd/supervisor/objects"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// pauseInRootfs is where the pause binary is bound in a sandbox's rootfs.
const pauseInRootfs = "/pause"

// podShmSize is the size of a pod's /dev/shm tmpfs, as kubelet's default.
const podShmSize = 64 << 20

// stopWait bounds the wait for a killed process's exit event.
const stopWait = 30 * time.Second

// RunPodSandbox reserves the pod's name in the loop, makes its record, its
// network namespace (CNI), its /dev/shm and files (hostname, resolv.conf,
// hosts), commits it (visible from then on) and runs its pause process as
// a container of the loop. Each step's undo is registered before the step
// and runs with a context of its own: a failed or cancelled request leaves
// nothing, or, when the cleanup itself fails, a NOTREADY pod to remove. A
// request cancelled while the pause starts leaves such a pod too (its
// removal is refused until the start ends, and the pause the start made is
// killed): kubelet's next attempt and its sandbox GC remove it.
func (s *Server) RunPodSandbox(ctx context.Context, r *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	cfg := r.GetConfig()
	if cfg.GetMetadata().GetName() == "" {
		return nil, toStatus(fmt.Errorf("sandbox config: metadata.name is required: %w", errdefs.ErrInvalidArgument))
	}
	if err := validateSandboxConfig(cfg); err != nil {
		return nil, toStatus(err)
	}
	handler, err := s.podHandler(r.GetRuntimeHandler(), cfg)
	if err != nil {
		return nil, toStatus(err)
	}
	id := newID()
	name := sandboxName(cfg.GetMetadata())
	if err := s.reserve(ctx, supervisor.ObjectSpec{Kind: objects.Sandbox, ID: id, Name: name}); err != nil {
		return nil, toStatus(fmt.Errorf("sandbox %s: %w", name, err))
	}
	crashpoint.At("run-pod:after-reserve")
	if err := s.runSandbox(ctx, id, cfg, handler); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
}

func (s *Server) runSandbox(ctx context.Context, id string, cfg *runtimeapi.PodSandboxConfig, handler RuntimeHandler) (err error) {
	log := s.log.WithField("sandbox", id)
	undo := &undoList{}
	defer func() {
		if err != nil {
			undo.run(log)
		}
	}()
	undo.add("release the pod's name", func(ctx context.Context) error { return s.forgetObject(ctx, id) })
	p, err := s.prepareSandbox(ctx, id, cfg, handler, undo)
	if err != nil {
		return err
	}
	s.recs.addSandbox(p.sb)
	undo.add("forget the record", func(context.Context) error { s.recs.remove(id); return nil })
	if _, err := s.sup.CommitObject(ctx, id); err != nil {
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	crashpoint.At("run-pod:after-commit")
	// Visible from here on: the undo is the pod's removal.
	*undo = undoList{}
	undo.add("remove the pod", func(ctx context.Context) error { return s.removeSandbox(ctx, p.sb) })
	if _, err := s.sup.StartObject(ctx, handler.request(supervisor.CreateRequest{ID: id, Bundle: p.bundle, Labels: sandboxLabels(cfg)})); err != nil {
		return fmt.Errorf("sandbox %s: start the pause process: %w", id, err)
	}
	crashpoint.At("run-pod:after-start")
	if p.lateNetwork {
		return s.joinLateNetwork(ctx, p, undo)
	}
	return nil
}

// joinLateNetwork plugs a user-namespaced pod into the network once its
// pause process made the namespace.
func (s *Server) joinLateNetwork(ctx context.Context, p *sandboxPlan, undo *undoList) error {
	id := p.sb.rec.ID
	o, err := s.objectOf(ctx, id)
	if err != nil {
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	if o.State != objects.Running || o.Pid <= 0 {
		return fmt.Errorf("sandbox %s: the pause process is not running: %w", id, errdefs.ErrFailedPrecondition)
	}
	ips, err := s.setupNetwork(ctx, id, p.sb.cfg, o.Pid, undo)
	if err != nil {
		return err
	}
	// The record says where the netns is; the IPs are the pod's status:
	// rewritten in place (the pause has /etc/hosts bound already) and in
	// the record, which readers take from the cache.
	p.sb.rec.IPs = ips
	if _, err := writePodFiles(p.dir, p.sb.cfg, ips); err != nil {
		return err
	}
	if err := writeRecord(p.dir, "sandbox.json", &p.sb.rec); err != nil {
		return err
	}
	s.recs.addSandbox(&sandbox{rec: p.sb.rec, cfg: p.sb.cfg, res: p.sb.res})
	return nil
}

// StopPodSandbox stops the pod's containers and its pause process and tears
// its network down. Stopping a stopped or unknown pod is not an error.
func (s *Server) StopPodSandbox(ctx context.Context, r *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	sb, err := s.recs.sandbox(r.GetPodSandboxId())
	if errdefs.IsNotFound(err) {
		return &runtimeapi.StopPodSandboxResponse{}, nil // CRI: nothing left to stop is success
	}
	if err != nil {
		return nil, toStatus(err)
	}
	if err := s.stopSandbox(ctx, sb); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

func (s *Server) stopSandbox(ctx context.Context, sb *sandbox) error {
	id := sb.rec.ID
	for _, c := range s.recs.containersOf(id) {
		if err := s.stopContainer(ctx, c, 0); err != nil {
			return err
		}
	}
	crashpoint.At("stop-pod:after-containers")
	if err := s.stopPause(ctx, id); err != nil {
		return err
	}
	crashpoint.At("stop-pod:after-pause")
	if err := s.teardownNetwork(ctx, id, sb.rec.NetNS); err != nil {
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	return nil
}

// stopPause kills the pod's pause process if it runs, and waits for its
// exit. What the loop says is what is done: the objects are restored with
// the processes.
func (s *Server) stopPause(ctx context.Context, id string) error {
	o, err := s.objectOf(ctx, id)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	if o.Starting {
		return fmt.Errorf("sandbox %s is being started: %w", id, errdefs.ErrFailedPrecondition)
	}
	if o.State != objects.Running {
		return nil
	}
	if err := s.killAndWait(ctx, id, "init"); err != nil {
		return fmt.Errorf("sandbox %s: stop the pause process: %w", id, err)
	}
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
	sb, err := s.recs.sandbox(r.GetPodSandboxId())
	if errdefs.IsNotFound(err) {
		return &runtimeapi.RemovePodSandboxResponse{}, nil
	}
	if err != nil {
		return nil, toStatus(err)
	}
	for _, c := range s.recs.containersOf(sb.rec.ID) {
		if err := s.removeContainer(ctx, c); err != nil {
			return nil, toStatus(err)
		}
	}
	crashpoint.At("remove-pod:after-containers")
	if err := s.removeSandbox(ctx, sb); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

// removeSandbox stops a pod whose containers are gone and removes it: its
// files and mounts, then its record, then the object. A removal that fails
// leaves the pod visible, NOTREADY, with why, for the caller's retry.
func (s *Server) removeSandbox(ctx context.Context, sb *sandbox) error {
	id := sb.rec.ID
	if err := s.stopSandbox(ctx, sb); err != nil {
		return err
	}
	crashpoint.At("remove-pod:after-stop")
	if _, err := s.sup.BeginRemoveObject(ctx, id); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	gone, err := s.removeSandboxFiles(id, sb.rec.Shm)
	if err != nil {
		s.sup.AbortRemoveObject(context.WithoutCancel(ctx), id, err.Error())
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	crashpoint.At("remove-pod:after-dir") // its record is gone: the removal is done but for the object
	s.removeRetired(gone)
	s.recs.remove(id)
	return s.sup.RemoveObject(ctx, id)
}

// removeSandboxFiles unmounts the pod's shm, removes its rootfs and retires
// its dir, whose removed path it returns (see retireRecordDir).
func (s *Server) removeSandboxFiles(id, shm string) (string, error) {
	if err := s.host.UnmountShm(shm); err != nil {
		return "", err
	}
	// The rootfs of a sandbox run from --sandbox-image (none otherwise:
	// removing an unknown rootfs is a no-op, whatever the flag is today).
	if err := s.cfg.Images.RemoveRootfs(id); err != nil {
		return "", err
	}
	return s.retireRecordDir(s.sandboxDir(id))
}

// sandboxPlan is a pod being made.
type sandboxPlan struct {
	sb     *sandbox
	dir    string
	bundle string
	rootfs string
	// pauseArgs is the pause process's argv.
	pauseArgs []string
	userNS    *ocispec.UserNS
	// lateNetwork: the pod's network namespace is made by its pause
	// process (inside its user namespace) and plugged in once it runs.
	lateNetwork bool
	files       podFiles
	// handler is the runtime handler the pod runs through.
	handler RuntimeHandler
}

// prepareSandbox makes everything of a pod but its process: the record is
// written first, naming every place the setup may make something, so that
// a crash at any later step is undone at the next start (reconcile.go).
func (s *Server) prepareSandbox(ctx context.Context, id string, cfg *runtimeapi.PodSandboxConfig, handler RuntimeHandler, undo *undoList) (*sandboxPlan, error) {
	p, err := s.planSandbox(id, cfg, handler)
	if err != nil {
		return nil, err
	}
	undo.addUnlessFailed("remove the pod's dir", func(context.Context) error { return s.removeRecordDir(p.dir) })
	if err := writeRecord(p.dir, "sandbox.json", &p.sb.rec); err != nil {
		return nil, err
	}
	crashpoint.At("run-pod:after-record")
	if err := os.MkdirAll(p.rootfs, 0o755); err != nil {
		return nil, err
	}
	if err := s.sandboxRootfs(ctx, p, undo); err != nil {
		return nil, err
	}
	if err := s.sandboxNamespaces(ctx, p, undo); err != nil {
		return nil, err
	}
	crashpoint.At("run-pod:after-shm") // the last of the namespaces' steps
	if err := s.sandboxBundle(p); err != nil {
		return nil, err
	}
	crashpoint.At("run-pod:after-bundle")
	if err := writeRecord(p.dir, "sandbox.json", &p.sb.rec); err != nil {
		return nil, err
	}
	crashpoint.At("run-pod:after-prepare")
	return p, nil
}

// planSandbox checks the request and decides the pod's paths and record.
func (s *Server) planSandbox(id string, cfg *runtimeapi.PodSandboxConfig, handler RuntimeHandler) (*sandboxPlan, error) {
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
	nsOpts := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	podNet := nsOpts.GetNetwork() != runtimeapi.NamespaceMode_NODE
	if podNet && s.cfg.Network == nil {
		return nil, errNoNetwork
	}
	dir := s.sandboxDir(id)
	p := &sandboxPlan{dir: dir, bundle: filepath.Join(dir, "bundle"), rootfs: filepath.Join(dir, "bundle", "rootfs"),
		pauseArgs: []string{pauseInRootfs}, userNS: userNS, lateNetwork: podNet && userNS != nil, handler: handler,
		sb: &sandbox{cfg: cfg, rec: sandboxRecord{ID: id, Config: raw, CreatedAt: time.Now().UnixNano(), RuntimeHandler: handler.Name},
			res: &liveResources[*podResources]{}}}
	if podNet {
		p.sb.rec.NetNS = s.netnsPath(id)
	}
	if nsOpts.GetIpc() != runtimeapi.NamespaceMode_NODE {
		p.sb.rec.Shm = s.shmPath(id)
	}
	return p, nil
}

// sandboxRootfs prepares the rootfs of a --sandbox-image pod, and with a
// user namespace makes it usable from inside.
func (s *Server) sandboxRootfs(ctx context.Context, p *sandboxPlan, undo *undoList) error {
	id := p.sb.rec.ID
	if s.cfg.SandboxImage != "" {
		undo.add("remove the sandbox image's rootfs", func(context.Context) error { return s.cfg.Images.RemoveRootfs(id) })
		var err error
		if p.rootfs, p.pauseArgs, err = s.sandboxImageRootfs(ctx, id, p.userNS); err != nil {
			return err
		}
	}
	if p.userNS == nil {
		return nil
	}
	if err := reachableFromUserNS(s.sandboxOwnDir(p), p.rootfs, p.userNS.HostRootGID()); err != nil {
		return err
	}
	// runc makes the mountpoints (/proc, /dev, /pause...) in the empty
	// rootfs from inside the namespace: its root must own it (an image's
	// rootfs has its upper dir given to that root instead).
	if s.cfg.SandboxImage == "" {
		return os.Chown(p.rootfs, int(p.userNS.HostRootUID()), int(p.userNS.HostRootGID()))
	}
	return nil
}

// sandboxNamespaces makes the pod's network (unless its pause makes it)
// and its /dev/shm.
func (s *Server) sandboxNamespaces(ctx context.Context, p *sandboxPlan, undo *undoList) error {
	id := p.sb.rec.ID
	if p.sb.rec.NetNS != "" && !p.lateNetwork {
		ips, err := s.setupNetwork(ctx, id, p.sb.cfg, 0, undo)
		if err != nil {
			return err
		}
		p.sb.rec.IPs = ips
	}
	if p.sb.rec.Shm != "" {
		undo.add("unmount the pod's /dev/shm", func(context.Context) error { return s.host.UnmountShm(p.sb.rec.Shm) })
		if err := s.host.MountShm(p.sb.rec.Shm); err != nil {
			return err
		}
	}
	return nil
}

// sandboxBundle writes the pod's files and the pause process's bundle.
func (s *Server) sandboxBundle(p *sandboxPlan) error {
	files, err := writePodFiles(p.dir, p.sb.cfg, p.sb.rec.IPs)
	if err != nil {
		return err
	}
	p.files = files
	specNetNS := p.sb.rec.NetNS
	if p.lateNetwork {
		specNetNS = ""
	}
	spec, err := ocispec.Sandbox(p.sb.cfg, ocispec.SandboxParams{
		ID: p.sb.rec.ID, PauseArgs: p.pauseArgs, RootfsPath: p.rootfs, NetNSPath: specNetNS,
		ResolvConfPath: files.resolvConf, HostnamePath: files.hostname, HostsPath: files.hosts, ShmPath: p.sb.rec.Shm,
	})
	if err != nil {
		return fmt.Errorf("%w: %w", err, errdefs.ErrInvalidArgument) // ocispec names the field
	}
	spec.Version = p.handler.specVersion()
	if s.cfg.SandboxImage == "" {
		spec.Mounts = append(spec.Mounts, pauseMount(s.cfg.Pause))
	} else if p.userNS != nil {
		if err := makeMountpoints(p.rootfs, spec); err != nil {
			return err
		}
	}
	return writeBundle(p.bundle, spec)
}
