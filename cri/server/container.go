package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/cri/ocispec"
	"github.com/evjournal/containerd/image"
	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/supervisor"
	"github.com/evjournal/containerd/supervisor/journal"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// container is one CRI container: its record and decoded config. Guarded
// by Server.mu.
type container struct {
	rec containerRecord
	cfg *runtimeapi.ContainerConfig
}

// CreateContainer prepares the container (rootfs from its image, OCI spec
// joining the pod's namespaces, bundle) without running anything: the
// supervisor runs it at StartContainer.
func (s *Server) CreateContainer(ctx context.Context, r *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	cfg, sbCfg := r.GetConfig(), r.GetSandboxConfig()
	if cfg.GetMetadata().GetName() == "" {
		return nil, toStatus(fmt.Errorf("container config: metadata.name is required: %w", errdefs.ErrInvalidArgument))
	}
	sb, err := s.getSandbox(r.GetPodSandboxId())
	if err != nil {
		return nil, toStatus(err)
	}
	s.mu.Lock()
	sbRec := sb.rec
	if sbCfg == nil {
		sbCfg = sb.cfg
	}
	s.mu.Unlock()
	if sbRec.State != sandboxReady {
		return nil, toStatus(fmt.Errorf("pod sandbox %s is not ready: %w", sbRec.ID, errdefs.ErrFailedPrecondition))
	}
	if err := s.reserveContainerName(sbRec.ID, cfg.GetMetadata()); err != nil {
		return nil, toStatus(err)
	}
	img, err := s.cfg.Images.Get(cfg.GetImage().GetImage())
	if err != nil {
		return nil, toStatus(fmt.Errorf("container config: image %q: %w", cfg.GetImage().GetImage(), err))
	}
	id := newID()
	c, err := s.createContainer(id, cfg, sbCfg, sbRec, img.ID, imageRef(img.RepoDigests, img.ID), img.Config)
	if err != nil {
		return nil, toStatus(err)
	}
	s.mu.Lock()
	s.containers[id] = c
	s.mu.Unlock()
	// In the journal before kubelet hears of it; without the journal the
	// container is not made (as any request that makes an event).
	if err := s.sup.Note(ctx, journal.TypeCRICreated, id); err != nil {
		s.mu.Lock()
		delete(s.containers, id)
		s.mu.Unlock()
		s.cfg.Images.RemoveRootfs(id)
		os.RemoveAll(s.containerDir(id))
		return nil, toStatus(fmt.Errorf("container %s: %w", id, err))
	}
	s.broadcastContainer(c, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	return &runtimeapi.CreateContainerResponse{ContainerId: id}, nil
}

func imageRef(digests []string, id string) string {
	if len(digests) > 0 {
		return digests[0]
	}
	return id
}

func (s *Server) reserveContainerName(sandboxID string, m *runtimeapi.ContainerMetadata) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.containers {
		o := c.cfg.GetMetadata()
		if c.rec.SandboxID == sandboxID && o.GetName() == m.GetName() && o.GetAttempt() == m.GetAttempt() {
			return fmt.Errorf("container %q (attempt %d) exists already in pod %s as %s: %w", m.GetName(), m.GetAttempt(), sandboxID, c.rec.ID, errdefs.ErrAlreadyExists)
		}
	}
	return nil
}

func (s *Server) createContainer(id string, cfg *runtimeapi.ContainerConfig, sbCfg *runtimeapi.PodSandboxConfig, sb sandboxRecord,
	imageID, imageRef string, imgCfg ocispec.ImageConfig) (c *container, err error) {
	var undo undoList
	defer func() {
		if err != nil {
			undo.run()
		}
	}()
	raw, err := marshalProto(cfg)
	if err != nil {
		return nil, fmt.Errorf("container config: %w", err)
	}
	dir := s.containerDir(id)
	if err := os.MkdirAll(filepath.Join(dir, "bundle"), 0o700); err != nil {
		return nil, err
	}
	undo.add(func() { os.RemoveAll(dir) })
	var idmap []image.IDMap
	if userNS, err := ocispec.PodUserNS(sbCfg); err != nil {
		return nil, fmt.Errorf("%w: %w", err, errdefs.ErrInvalidArgument)
	} else if userNS != nil {
		// The image's files are seen through the pod's mapping, so that
		// its root owns what the image gives to root.
		if sb.Pid <= 0 {
			return nil, fmt.Errorf("the sandbox has no running pause process to take the user namespace from: %w", errdefs.ErrFailedPrecondition)
		}
		idmap = append(idmap, image.IDMap{UserNS: fmt.Sprintf("/proc/%d/ns/user", sb.Pid),
			RootUID: userNS.HostRootUID(), RootGID: userNS.HostRootGID()})
	}
	rootfs, err := s.cfg.Images.PrepareRootfs(id, imageID, idmap...)
	if err != nil {
		return nil, fmt.Errorf("container rootfs: %w", err)
	}
	undo.add(func() { s.cfg.Images.RemoveRootfs(id) })
	if len(idmap) > 0 {
		if err := searchableFromUserNS(s.dataRoot(), rootfs); err != nil {
			return nil, err
		}
	}
	sbDir := s.sandboxDir(sb.ID)
	spec, err := ocispec.Container(cfg, sbCfg, imgCfg, ocispec.ContainerParams{
		ID: id, SandboxID: sb.ID, RootfsPath: rootfs, ImageName: cfg.GetImage().GetImage(),
		SandboxPid: sb.Pid, NetNSPath: sb.NetNS, ShmPath: sb.Shm,
		HostsPath: filepath.Join(sbDir, "hosts"), ResolvConfPath: filepath.Join(sbDir, "resolv.conf"), HostnamePath: filepath.Join(sbDir, "hostname"),
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, errdefs.ErrInvalidArgument) // ocispec names the field
	}
	if err := writeBundle(filepath.Join(dir, "bundle"), spec); err != nil {
		return nil, err
	}
	logPath := ""
	if cfg.GetLogPath() != "" && sbCfg.GetLogDirectory() != "" {
		logPath = filepath.Join(sbCfg.GetLogDirectory(), cfg.GetLogPath())
	}
	rec := containerRecord{ID: id, SandboxID: sb.ID, Config: raw, ImageID: imageID, ImageRef: imageRef,
		State: stateCreated, CreatedAt: time.Now().UnixNano(), LogPath: logPath, User: &spec.Process.User}
	if err := writeRecord(dir, "container.json", &rec); err != nil {
		return nil, err
	}
	return &container{rec: rec, cfg: cfg}, nil
}

// StartContainer runs a created container through the supervisor (shim,
// runc create and start); its output goes to its CRI log file.
func (s *Server) StartContainer(ctx context.Context, r *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	c, err := s.getContainer(r.GetContainerId())
	if err != nil {
		return nil, toStatus(err)
	}
	s.mu.Lock()
	rec := c.rec
	s.mu.Unlock()
	if rec.State != stateCreated {
		return nil, toStatus(fmt.Errorf("container %s is %s, not created: %w", rec.ID, rec.State, errdefs.ErrFailedPrecondition))
	}
	stdio, err := s.containerStdio(c)
	if err != nil {
		return nil, toStatus(err)
	}
	info, err := s.sup.CreateContainer(ctx, supervisor.CreateRequest{
		ID: rec.ID, Bundle: filepath.Join(s.containerDir(rec.ID), "bundle"), Stdio: stdio, Labels: containerLabels(c),
	})
	if err != nil {
		s.mu.Lock()
		c.rec.State, c.rec.FinishedAt, c.rec.ExitCode, c.rec.Reason, c.rec.Message = stateExited, time.Now().UnixNano(), 128, "StartError", err.Error()
		rec = c.rec
		s.mu.Unlock()
		writeRecord(s.containerDir(rec.ID), "container.json", &rec)
		return nil, toStatus(fmt.Errorf("container %s: start: %w", rec.ID, err))
	}
	s.mu.Lock()
	if c.rec.State == stateCreated { // the exit may have been applied already
		c.rec.State = stateRunning
	}
	c.rec.StartedAt, c.rec.Pid, c.rec.Incarnation = time.Now().UnixNano(), initPid(info), info.Incarnation
	rec = c.rec
	s.mu.Unlock()
	if err := writeRecord(s.containerDir(rec.ID), "container.json", &rec); err != nil {
		return nil, toStatus(err)
	}
	s.broadcastContainer(c, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
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

// StopContainer sends SIGTERM, waits up to the timeout, then SIGKILL.
// Stopping a container that does not run is not an error.
func (s *Server) StopContainer(ctx context.Context, r *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	c, err := s.getContainer(r.GetContainerId())
	if errdefs.IsNotFound(err) {
		return &runtimeapi.StopContainerResponse{}, nil // CRI: stopping what is gone is success
	}
	if err != nil {
		return nil, toStatus(err)
	}
	if err := s.stopContainer(ctx, c, time.Duration(r.GetTimeout())*time.Second); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.StopContainerResponse{}, nil
}

func (s *Server) stopContainer(ctx context.Context, c *container, grace time.Duration) error {
	// The state is read and the waiter registered under the lock exits are
	// applied under: an exit cannot fall between them.
	s.mu.Lock()
	id, state := c.rec.ID, c.rec.State
	if state != stateRunning {
		s.mu.Unlock()
		return nil
	}
	w := s.waitLocked(id, "init")
	s.mu.Unlock()
	defer s.unwait(id, "init", w)
	if grace > 0 {
		if err := s.signal(ctx, id, syscall.SIGTERM); err != nil {
			return err
		}
		if _, err := awaitExit(ctx, w, grace); err == nil {
			return nil
		}
	}
	if err := s.signal(ctx, id, syscall.SIGKILL); err != nil {
		return err
	}
	if _, err := awaitExit(ctx, w, stopWait); err != nil {
		return fmt.Errorf("container %s: %w", id, err)
	}
	return nil
}

// signal signals a container's init; one already gone is not an error
// (its exit event is on its way).
func (s *Server) signal(ctx context.Context, id string, sig syscall.Signal) error {
	err := s.sup.Signal(ctx, id, "init", sig)
	if err == nil || errors.Is(err, syscall.ESRCH) || errdefs.IsNotFound(err) {
		return nil
	}
	return fmt.Errorf("container %s: signal %d: %w", id, sig, err)
}

// RemoveContainer kills the container if it runs and removes its rootfs,
// bundle and record. Removing an unknown container is not an error.
func (s *Server) RemoveContainer(ctx context.Context, r *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	c, err := s.getContainer(r.GetContainerId())
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

func (s *Server) removeContainer(ctx context.Context, c *container) error {
	if err := s.stopContainer(ctx, c, 0); err != nil {
		return err
	}
	id := c.rec.ID
	// Journaled before anything is removed: a removal the journal cannot
	// record is refused whole. A removal that fails after this (a busy
	// rootfs) is retried by kubelet and journaled again.
	if err := s.sup.Note(ctx, journal.TypeCRIDeleted, id); err != nil {
		return fmt.Errorf("container %s: %w", id, err)
	}
	if err := s.cfg.Images.RemoveRootfs(id); err != nil {
		return fmt.Errorf("container %s: %w", id, err)
	}
	if err := os.RemoveAll(s.containerDir(id)); err != nil {
		return fmt.Errorf("container %s: %w", id, err)
	}
	s.mu.Lock()
	delete(s.containers, id)
	s.mu.Unlock()
	s.broadcastContainer(c, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT)
	return nil
}

func (s *Server) getContainer(id string) (*container, error) {
	if id == "" {
		return nil, fmt.Errorf("container id is empty: %w", errdefs.ErrInvalidArgument)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.containers[id]; ok {
		return c, nil
	}
	for full, c := range s.containers {
		if len(id) >= 8 && strings.HasPrefix(full, id) {
			return c, nil
		}
	}
	return nil, fmt.Errorf("container %q: %w", id, errdefs.ErrNotFound)
}

// containersOf lists the containers of a pod.
func (s *Server) containersOf(sandboxID string) []*container {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*container
	for _, c := range s.containers {
		if c.rec.SandboxID == sandboxID {
			out = append(out, c)
		}
	}
	return out
}

var crState = map[string]runtimeapi.ContainerState{
	stateCreated: runtimeapi.ContainerState_CONTAINER_CREATED,
	stateRunning: runtimeapi.ContainerState_CONTAINER_RUNNING,
	stateExited:  runtimeapi.ContainerState_CONTAINER_EXITED,
}

// containerStatus builds the CRI status. Call with s.mu held.
func containerStatus(c *container) *runtimeapi.ContainerStatus {
	st, ok := crState[c.rec.State]
	if !ok {
		st = runtimeapi.ContainerState_CONTAINER_UNKNOWN
	}
	return &runtimeapi.ContainerStatus{
		Id: c.rec.ID, Metadata: c.cfg.GetMetadata(), State: st,
		CreatedAt: c.rec.CreatedAt, StartedAt: c.rec.StartedAt, FinishedAt: c.rec.FinishedAt, ExitCode: c.rec.ExitCode,
		Image: c.cfg.GetImage(), ImageRef: c.rec.ImageRef, ImageId: c.rec.ImageID,
		Reason: c.rec.Reason, Message: c.rec.Message,
		Labels: c.cfg.GetLabels(), Annotations: c.cfg.GetAnnotations(), Mounts: c.cfg.GetMounts(), LogPath: c.rec.LogPath,
		User: containerUser(c.rec.User),
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
	c, err := s.getContainer(r.GetContainerId())
	if err != nil {
		return nil, toStatus(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return &runtimeapi.ContainerStatusResponse{Status: containerStatus(c)}, nil
}

func (s *Server) ListContainers(ctx context.Context, r *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	f := r.GetFilter()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*runtimeapi.Container
	for _, c := range s.containers {
		st := containerStatus(c)
		if !c.matches(f.GetId(), f.GetPodSandboxId(), f.GetLabelSelector()) || f.GetState() != nil && f.GetState().GetState() != st.State {
			continue
		}
		out = append(out, &runtimeapi.Container{Id: st.Id, PodSandboxId: c.rec.SandboxID, Metadata: st.Metadata, Image: st.Image,
			ImageRef: st.ImageRef, ImageId: st.ImageId, State: st.State, CreatedAt: st.CreatedAt, Labels: st.Labels, Annotations: st.Annotations})
	}
	slices.SortFunc(out, func(a, b *runtimeapi.Container) int { return cmp.Compare(a.CreatedAt, b.CreatedAt) })
	return &runtimeapi.ListContainersResponse{Containers: out}, nil
}
