package server

import (
	"context"
	"syscall"
	"time"

	"github.com/evjournal/containerd/image"
	"github.com/evjournal/containerd/podnet"
	"github.com/evjournal/containerd/supervisor"
	"github.com/evjournal/containerd/supervisor/journal"
	"github.com/evjournal/containerd/supervisor/objects"
)

// What the service needs of the rest of the daemon, as small interfaces:
// the daemon gives it the supervisor's loop, the image store and the CNI
// network; the unit tests give it fakes (fakes_test.go), so that its state
// machine is tested without root, runc or CNI plugins.

// Loop is what the service needs of the supervisor's loop.
type Loop interface {
	ObjectLifecycle
	ProcessControl
}

// ObjectLifecycle is the loop's table of pods and containers
// (supervisor/cri.go): reserved names, checked transitions, copies to read.
type ObjectLifecycle interface {
	ReserveObject(ctx context.Context, spec supervisor.ObjectSpec) error
	ReleaseObject(ctx context.Context, id string) error
	CommitObject(ctx context.Context, id string) (objects.Object, error)
	StartObject(ctx context.Context, r supervisor.CreateRequest) (objects.Object, error)
	Object(ctx context.Context, id string) (objects.Object, error)
	Objects(ctx context.Context) ([]objects.Object, error)
	BeginRemoveObject(ctx context.Context, id string) (objects.Object, error)
	AbortRemoveObject(ctx context.Context, id, why string) error
	RemoveObject(ctx context.Context, id string) error
	ImportObjects(ctx context.Context, objs []objects.Object) (int, error)
}

// ProcessControl is the loop's control of the processes it runs for the
// objects: their exits, signals, execs, state, limits and logs. (Stats are
// read from the cgroups directly: statsread.go.)
type ProcessControl interface {
	WatchExit(ctx context.Context, id, pid string) (exits <-chan supervisor.ExitStatus, stop func(), err error)
	Signal(ctx context.Context, id, pid string, sig syscall.Signal) error
	Exec(ctx context.Context, r supervisor.ExecRequest) (int, error)
	State(ctx context.Context, id string) ([]supervisor.ContainerInfo, error)
	Update(ctx context.Context, r supervisor.UpdateRequest) error
	UpdateProcess(ctx context.Context, r supervisor.ProcessUpdate) error
	ReopenLog(ctx context.Context, id, pid string) error
}

// EventSource is the journal's events for GetContainerEvents: those
// stored after a time (all the journal holds, --retain-count aside), then
// live ones.
type EventSource interface {
	Events(ctx context.Context, after time.Time) (EventStream, error)
}

// EventStream is one subscription; Next ends with *supervisor.LagError
// when its reader fell behind.
type EventStream interface {
	Next(ctx context.Context) (journal.Event, error)
	Close()
}

// ImageStore is what the service needs of the image store: images, and
// the rootfs it prepares for each pod and container.
type ImageStore interface {
	Get(refOrID string) (image.Image, error)
	Pull(ctx context.Context, ref string, auth *image.Auth) (image.Image, error)
	PrepareRootfs(containerID, refOrID string, idmap ...image.IDMap) (string, error)
	MountRootfs(containerID string) (string, error)
	RemoveRootfs(containerID string) error
	ListRootfs() []image.Rootfs
}

// PodNetwork is the CNI network pods join.
type PodNetwork interface {
	Setup(ctx context.Context, podID, netnsPath string, opts podnet.SetupOptions) (podnet.Result, error)
	Teardown(ctx context.Context, podID, netnsPath string) error
	Status() error
}

// podMounts are the mounts a pod's setup makes on the host: its pinned
// network namespace and its /dev/shm tmpfs (root only).
type podMounts interface {
	NewNetNS(dir, id string) error
	PinNetNS(dir, id string, pid int) error
	RemoveNetNS(path string) error
	MountShm(dir string) error
	UnmountShm(dir string) error
}

var (
	_ Loop       = (*supervisor.Supervisor)(nil)
	_ ImageStore = (*image.Store)(nil)
	_ PodNetwork = (*podnet.Network)(nil)
	_ podMounts  = hostMounts{}
)

// journalEvents is the supervisor's journal as an EventSource.
type journalEvents struct{ sup *supervisor.Supervisor }

func (j journalEvents) Events(ctx context.Context, after time.Time) (EventStream, error) {
	sub, err := j.sup.Subscribe(ctx, supervisor.SubscribeRequest{After: after, Retained: true})
	if err != nil {
		return nil, err
	}
	return sub, nil
}

// hostMounts are the host's: package podnet's pins and a tmpfs.
type hostMounts struct{}

func (hostMounts) NewNetNS(dir, id string) error {
	_, err := podnet.NewNetNS(dir, id)
	return err
}

func (hostMounts) PinNetNS(dir, id string, pid int) error {
	_, err := podnet.PinNetNS(dir, id, pid)
	return err
}

func (hostMounts) RemoveNetNS(path string) error { return podnet.RemoveNetNS(path) }

func (hostMounts) MountShm(dir string) error {
	_, err := mountShm(dir)
	return err
}

func (hostMounts) UnmountShm(dir string) error { return unmountShm(dir) }
