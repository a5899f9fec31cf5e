package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/cri/ocispec"
	"github.com/evjournal/containerd/image"
	"github.com/evjournal/containerd/internal/crashpoint"
	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/supervisor"
	"github.com/evjournal/containerd/supervisor/objects"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// CreateContainer reserves the container's name in the loop, prepares it
// (rootfs from its image, OCI spec joining the pod's namespaces, bundle,
// record) and commits it, without running anything: StartContainer does.
// A create cut short leaves nothing; one whose pod is stopped or removed
// meanwhile fails (the pod's removal waits for the reservation to end).
func (s *Server) CreateContainer(ctx context.Context, r *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	cfg := r.GetConfig()
	if cfg.GetMetadata().GetName() == "" {
		return nil, toStatus(fmt.Errorf("container config: metadata.name is required: %w", errdefs.ErrInvalidArgument))
	}
	sb, err := s.recs.sandbox(r.GetPodSandboxId())
	if err != nil {
		return nil, toStatus(err)
	}
	if err := validateContainerConfig(cfg, cmp.Or(r.GetSandboxConfig(), sb.cfg)); err != nil {
		return nil, toStatus(err)
	}
	if _, err := s.cdiDevices(cfg); err != nil {
		return nil, toStatus(err)
	}
	pod, err := s.readyPod(ctx, sb)
	if err != nil {
		return nil, toStatus(err)
	}
	handler, err := s.handlerOf(sb)
	if err != nil {
		return nil, toStatus(err)
	}
	id := newID()
	name := containerName(sb.rec.ID, cfg.GetMetadata())
	spec := supervisor.ObjectSpec{Kind: objects.Container, ID: id, SandboxID: sb.rec.ID, Name: name}
	if err := s.reserve(ctx, spec); err != nil {
		return nil, toStatus(fmt.Errorf("container %q (attempt %d) in pod %s: %w", cfg.GetMetadata().GetName(), cfg.GetMetadata().GetAttempt(), sb.rec.ID, err))
	}
	crashpoint.At("create:after-reserve")
	if err := s.makeContainer(ctx, id, r, sb, pod, handler); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.CreateContainerResponse{ContainerId: id}, nil
}

// readyPod is the loop's view of a pod that must be ready.
func (s *Server) readyPod(ctx context.Context, sb *sandbox) (objects.Object, error) {
	o, err := s.objectOf(ctx, sb.rec.ID)
	if err != nil {
		return o, fmt.Errorf("pod sandbox %s: %w", sb.rec.ID, err)
	}
	if o.State != objects.Running || o.Removing {
		return o, fmt.Errorf("pod sandbox %s is not ready: %w", sb.rec.ID, errdefs.ErrFailedPrecondition)
	}
	return o, nil
}

func (s *Server) makeContainer(ctx context.Context, id string, r *runtimeapi.CreateContainerRequest, sb *sandbox, pod objects.Object, handler RuntimeHandler) (err error) {
	undo := &undoList{}
	defer func() {
		if err != nil {
			undo.run(s.log.WithField("container", id))
		}
	}()
	undo.add("release the container's name", func(ctx context.Context) error { return s.forgetObject(ctx, id) })
	cfg, sbCfg := r.GetConfig(), r.GetSandboxConfig()
	if sbCfg == nil {
		sbCfg = sb.cfg
	}
	img, err := s.cfg.Images.Get(cfg.GetImage().GetImage())
	if err != nil {
		return fmt.Errorf("container config: image %q: %w", cfg.GetImage().GetImage(), err)
	}
	c, err := s.createContainer(id, cfg, sbCfg, sb.rec, pod.Pid, img.ID, imageRef(img.RepoDigests, img.ID), img.Config, handler, undo)
	if err != nil {
		return err
	}
	s.recs.addContainer(c)
	undo.add("forget the record", func(context.Context) error { s.recs.remove(id); return nil })
	// In the journal before kubelet hears of it; without the journal the
	// container is not made (as any request that makes an event).
	if _, err := s.sup.CommitObject(ctx, id); err != nil {
		return fmt.Errorf("container %s: %w", id, err)
	}
	crashpoint.At("create:after-commit")
	return nil
}

// createContainer makes the container's dir, rootfs, bundle and record;
// each step's undo is registered in undo before it.
func (s *Server) createContainer(id string, cfg *runtimeapi.ContainerConfig, sbCfg *runtimeapi.PodSandboxConfig, sb sandboxRecord,
	pausePid int, imageID, imageRef string, imgCfg ocispec.ImageConfig, handler RuntimeHandler, undo *undoList) (*container, error) {
	raw, err := marshalProto(cfg)
	if err != nil {
		return nil, fmt.Errorf("container config: %w", err)
	}
	stopSignal, err := stopSignalOf(cfg, imgCfg.StopSignal)
	if err != nil {
		return nil, err
	}
	dir := s.containerDir(id)
	undo.add("remove the container's dir", func(context.Context) error { return s.removeRecordDir(dir) })
	if err := os.MkdirAll(filepath.Join(dir, "bundle"), 0o700); err != nil {
		return nil, err
	}
	crashpoint.At("create:after-dir")
	var idmap []image.IDMap
	if userNS, err := ocispec.PodUserNS(sbCfg); err != nil {
		return nil, fmt.Errorf("%w: %w", err, errdefs.ErrInvalidArgument)
	} else if userNS != nil {
		// The image's files are seen through the pod's mapping, so that
		// its root owns what the image gives to root.
		if pausePid <= 0 {
			return nil, fmt.Errorf("the sandbox has no running pause process to take the user namespace from: %w", errdefs.ErrFailedPrecondition)
		}
		idmap = append(idmap, image.IDMap{UserNS: fmt.Sprintf("/proc/%d/ns/user", pausePid),
			RootUID: userNS.HostRootUID(), RootGID: userNS.HostRootGID()})
	}
	undo.add("remove the container's rootfs", func(context.Context) error { return s.cfg.Images.RemoveRootfs(id) })
	rootfs, err := s.cfg.Images.PrepareRootfs(id, imageID, idmap...)
	if err != nil {
		return nil, fmt.Errorf("container rootfs: %w", err)
	}
	crashpoint.At("create:after-rootfs")
	if len(idmap) > 0 {
		if err := reachableFromUserNS(filepath.Dir(rootfs), rootfs, idmap[0].RootGID); err != nil {
			return nil, err
		}
	}
	sbDir := s.sandboxDir(sb.ID)
	spec, err := ocispec.Container(cfg, sbCfg, imgCfg, ocispec.ContainerParams{
		ID: id, SandboxID: sb.ID, RootfsPath: rootfs, ImageName: cfg.GetImage().GetImage(),
		SandboxPid: pausePid, NetNSPath: sb.NetNS, ShmPath: sb.Shm,
		HostsPath: filepath.Join(sbDir, "hosts"), ResolvConfPath: filepath.Join(sbDir, "resolv.conf"), HostnamePath: filepath.Join(sbDir, "hostname"),
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, errdefs.ErrInvalidArgument) // ocispec names the field
	}
	spec.Version = handler.specVersion()
	if err := s.injectCDI(spec, cfg); err != nil {
		return nil, err
	}
	if err := writeBundle(filepath.Join(dir, "bundle"), spec); err != nil {
		return nil, err
	}
	crashpoint.At("create:after-bundle")
	logPath := ""
	if cfg.GetLogPath() != "" && sbCfg.GetLogDirectory() != "" {
		logPath = filepath.Join(sbCfg.GetLogDirectory(), cfg.GetLogPath())
	}
	rec := containerRecord{ID: id, SandboxID: sb.ID, Config: raw, ImageID: imageID, ImageRef: imageRef,
		CreatedAt: time.Now().UnixNano(), LogPath: logPath, User: &spec.Process.User, StopSignal: stopSignal}
	if err := writeRecord(dir, "container.json", &rec); err != nil {
		return nil, err
	}
	crashpoint.At("create:after-record")
	return newContainer(rec, cfg, dir)
}

// StartContainer runs a created container as a container of the loop
// (shim, runc create and start); its output goes to its CRI log file. The
// loop decides what the container is: running, or exited with StartError
// when no process could be started, whatever happens to this call.
func (s *Server) StartContainer(ctx context.Context, r *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	c, err := s.recs.container(r.GetContainerId())
	if err != nil {
		return nil, toStatus(err)
	}
	// The pod's runtime: a container runs beside its pause, and its execs
	// follow it (the runtime layer keeps each container's runtime).
	sb, err := s.recs.sandbox(c.rec.SandboxID)
	if err != nil {
		return nil, toStatus(fmt.Errorf("container %s: its pod: %v: %w", c.rec.ID, err, errdefs.ErrFailedPrecondition))
	}
	handler, err := s.handlerOf(sb)
	if err != nil {
		return nil, toStatus(err)
	}
	stdio, err := s.containerStdio(c)
	if err != nil {
		return nil, toStatus(err)
	}
	crashpoint.At("start:after-stdio")
	_, err = s.sup.StartObject(ctx, handler.request(supervisor.CreateRequest{
		ID: c.rec.ID, Bundle: filepath.Join(s.containerDir(c.rec.ID), "bundle"), Stdio: stdio, Labels: containerLabels(c),
	}))
	if err != nil {
		return nil, toStatus(fmt.Errorf("container %s: start: %w", c.rec.ID, err))
	}
	crashpoint.At("start:after-start")
	return &runtimeapi.StartContainerResponse{}, nil
}

// containerStdio is a started container's stdio: its output to its CRI log
// (kubelet's LogPath, else a private one in the container's dir, so that
// Attach always has the output to follow), and with config.stdin a FIFO in
// the container's dir that Attach writes to.
func (s *Server) containerStdio(c *container) (runtime.Stdio, error) {
	dir := s.containerDir(c.rec.ID)
	stdio := runtime.Stdio{LogPath: s.outputLog(c)}
	if err := os.MkdirAll(filepath.Dir(stdio.LogPath), 0o755); err != nil {
		return stdio, fmt.Errorf("container %s: log dir: %w", c.rec.ID, err)
	}
	if c.cfg.GetStdin() {
		stdio.Stdin = filepath.Join(dir, "stdin")
		if err := unix.Mkfifo(stdio.Stdin, 0o600); err != nil && !errors.Is(err, os.ErrExist) {
			return stdio, fmt.Errorf("container %s: stdin fifo: %w", c.rec.ID, err)
		}
	}
	return stdio, nil
}

// outputLog is where a container's output goes.
func (s *Server) outputLog(c *container) string {
	if c.rec.LogPath != "" {
		return c.rec.LogPath
	}
	return filepath.Join(s.containerDir(c.rec.ID), "output.log")
}

func containerLabels(c *container) []string {
	return []string{"io.kubernetes.cri.kind=container", "io.kubernetes.cri.sandbox-id=" + c.rec.SandboxID,
		"io.kubernetes.container.name=" + c.cfg.GetMetadata().GetName()}
}

// StopContainer sends the container's stop signal (its config's, else its
// image's, else SIGTERM), waits up to the timeout, then SIGKILL.
// Stopping a container that does not run is not an error.
func (s *Server) StopContainer(ctx context.Context, r *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	c, err := s.recs.container(r.GetContainerId())
	if errdefs.IsNotFound(err) {
		return &runtimeapi.StopContainerResponse{}, nil // CRI: stopping what is gone is success
	}
	if err != nil {
		return nil, toStatus(err)
	}
	// The stop runs to its end whatever the caller does: a stop cut short
	// after its first signal would leave a container that ignores it
	// running, which nobody asked for (containerd gives up with its
	// caller). It is bounded: the timeout, then the wait for the kill.
	grace := time.Duration(r.GetTimeout()) * time.Second
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace+stopWait+10*time.Second)
	defer cancel()
	if err := s.stopContainer(stopCtx, c, grace); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.StopContainerResponse{}, nil
}

// stopContainer stops what the loop says runs. The exit watch is taken in
// the loop: an exit that came first is delivered at once.
func (s *Server) stopContainer(ctx context.Context, c *container, grace time.Duration) error {
	id := c.rec.ID
	o, err := s.objectOf(ctx, id)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("container %s: %w", id, err)
	}
	if o.Starting {
		return fmt.Errorf("container %s is being started: %w", id, errdefs.ErrFailedPrecondition)
	}
	if o.State != objects.Running {
		return nil
	}
	exits, stop, err := s.sup.WatchExit(ctx, id, "init")
	if err != nil {
		return fmt.Errorf("container %s: %w", id, err)
	}
	defer stop()
	if grace > 0 {
		if err := s.signal(ctx, id, c.stopSignal()); err != nil {
			return err
		}
		if _, err := awaitExit(ctx, exits, grace); err == nil {
			return nil
		}
	}
	if err := s.signal(ctx, id, syscall.SIGKILL); err != nil {
		return err
	}
	if _, err := awaitExit(ctx, exits, stopWait); err != nil {
		return fmt.Errorf("container %s: %w", id, err)
	}
	return nil
}

// signal signals a container's init; one already gone is not an error
// (its exit event is on its way).
func (s *Server) signal(ctx context.Context, id string, sig syscall.Signal) error {
	err := s.sup.Signal(ctx, id, "init", sig)
	crashpoint.At("stop:after-signal")
	if err == nil || errors.Is(err, syscall.ESRCH) || errdefs.IsNotFound(err) {
		return nil
	}
	return fmt.Errorf("container %s: signal %d: %w", id, sig, err)
}

// RemoveContainer kills the container if it runs and removes its rootfs,
// bundle and record, then the object. Removing an unknown container is
// not an error.
func (s *Server) RemoveContainer(ctx context.Context, r *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	c, err := s.recs.container(r.GetContainerId())
	if errdefs.IsNotFound(err) {
		return &runtimeapi.RemoveContainerResponse{}, nil
	}
	if err != nil {
		return nil, toStatus(err)
	}
	if err := s.removeContainer(ctx, c); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.RemoveContainerResponse{}, nil
}

// removeContainer frees what is the runtime's first (rootfs, upper dir,
// bundle), then the record, then the object: a removal cut short is
// finished at the next start, one that fails leaves the container visible
// with why. It never needs the journal to write (a full disk is what
// kubelet frees by removing).
func (s *Server) removeContainer(ctx context.Context, c *container) error {
	id := c.rec.ID
	if err := s.stopContainer(ctx, c, 0); err != nil {
		return err
	}
	if _, err := s.sup.BeginRemoveObject(ctx, id); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("container %s: %w", id, err)
	}
	crashpoint.At("remove:after-begin")
	err := s.cfg.Images.RemoveRootfs(id)
	var gone string
	if err == nil {
		crashpoint.At("remove:after-rootfs")
		gone, err = s.retireRecordDir(s.containerDir(id))
	}
	if err != nil {
		s.sup.AbortRemoveObject(context.WithoutCancel(ctx), id, err.Error())
		return fmt.Errorf("container %s: %w", id, err)
	}
	crashpoint.At("remove:after-dir") // its record is gone: the removal is done but for the object
	s.removeRetired(gone)
	s.recs.remove(id)
	return s.sup.RemoveObject(ctx, id)
}

func imageRef(digests []string, id string) string {
	if len(digests) > 0 {
		return digests[0]
	}
	return id
}

var crState = map[objects.State]runtimeapi.ContainerState{
	objects.Created: runtimeapi.ContainerState_CONTAINER_CREATED,
	objects.Running: runtimeapi.ContainerState_CONTAINER_RUNNING,
	objects.Exited:  runtimeapi.ContainerState_CONTAINER_EXITED,
}

// containerStatus is the CRI status of a container: its record with the
// loop's view of it.
func containerStatus(c *container, o objects.Object) *runtimeapi.ContainerStatus {
	st, ok := crState[o.State]
	if !ok {
		st = runtimeapi.ContainerState_CONTAINER_UNKNOWN
	}
	message := o.Message
	if o.CleanupError != "" {
		message = "removal failed: " + o.CleanupError
	}
	return &runtimeapi.ContainerStatus{
		Id: c.rec.ID, Metadata: c.cfg.GetMetadata(), State: st,
		CreatedAt: c.rec.CreatedAt, StartedAt: o.StartedAt, FinishedAt: o.FinishedAt, ExitCode: o.ExitCode,
		Image: statusImage(c.cfg.GetImage()), ImageRef: c.rec.ImageRef, ImageId: c.rec.ImageID,
		Reason: o.Reason, Message: message,
		Labels: c.cfg.GetLabels(), Annotations: c.cfg.GetAnnotations(), Mounts: c.cfg.GetMounts(), LogPath: c.rec.LogPath,
		User: containerUser(c.rec.User), StopSignal: toCRISignal(signalName(c.stopSignal())),
		Resources: &runtimeapi.ContainerResources{Linux: c.resources()},
	}
}

// containerUser is the CRI's view of the process's identity; nil for a
// record written before the daemon kept it.
func containerUser(u *specs.User) *runtimeapi.ContainerUser {
	if u == nil {
		return nil
	}
	groups := make([]int64, len(u.AdditionalGids))
	for i, g := range u.AdditionalGids {
		groups[i] = int64(g)
	}
	return &runtimeapi.ContainerUser{Linux: &runtimeapi.LinuxContainerUser{Uid: int64(u.UID), Gid: int64(u.GID), SupplementalGroups: groups}}
}

func (s *Server) ContainerStatus(ctx context.Context, r *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	c, err := s.recs.container(r.GetContainerId())
	if err != nil {
		return nil, toStatus(err)
	}
	o, err := s.objectOf(ctx, c.rec.ID)
	if err != nil {
		return nil, toStatus(fmt.Errorf("container %s: %w", c.rec.ID, err))
	}
	return &runtimeapi.ContainerStatusResponse{Status: containerStatus(c, o)}, nil
}

func (s *Server) ListContainers(ctx context.Context, r *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	f := r.GetFilter()
	objs, err := s.objectMap(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	var out []*runtimeapi.Container
	for _, c := range s.recs.allContainers() {
		o, ok := objs[c.rec.ID]
		if !ok {
			continue // being made, or removed meanwhile
		}
		st := containerStatus(c, o)
		if !c.matches(f.GetId(), f.GetPodSandboxId(), f.GetLabelSelector()) || f.GetState() != nil && f.GetState().GetState() != st.State {
			continue
		}
		out = append(out, &runtimeapi.Container{Id: st.Id, PodSandboxId: c.rec.SandboxID, Metadata: st.Metadata, Image: st.Image,
			ImageRef: st.ImageRef, ImageId: st.ImageId, State: st.State, CreatedAt: st.CreatedAt, Labels: st.Labels, Annotations: st.Annotations})
	}
	slices.SortFunc(out, func(a, b *runtimeapi.Container) int { return cmp.Compare(a.CreatedAt, b.CreatedAt) })
	return &runtimeapi.ListContainersResponse{Containers: out}, nil
}
