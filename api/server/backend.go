package server

import (
	"context"
	"syscall"

	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/supervisor"
	"github.com/evjournal/containerd/supervisor/journal"
)

// backend is what the handlers need from the supervisor. *supervisor.Supervisor
// provides it through supervisorBackend; tests use a fake.
type backend interface {
	CreateContainer(ctx context.Context, r supervisor.CreateRequest) (supervisor.ContainerInfo, error)
	Exec(ctx context.Context, r supervisor.ExecRequest) (int, error)
	Signal(ctx context.Context, id, pid string, sig syscall.Signal) error
	Update(ctx context.Context, r supervisor.UpdateRequest) error
	UpdateProcess(ctx context.Context, r supervisor.ProcessUpdate) error
	State(ctx context.Context, id string) ([]supervisor.ContainerInfo, error)
	Stats(ctx context.Context, id string) (*runtime.Stats, error)
	CreateCheckpoint(ctx context.Context, id, dir string, o runtime.CheckpointOpts) error
	DeleteCheckpoint(ctx context.Context, id, dir, name string) error
	ListCheckpoints(ctx context.Context, id, dir string) ([]runtime.Checkpoint, error)
	Subscribe(ctx context.Context, r supervisor.SubscribeRequest) (subscription, error)
	JournalID() string
}

// subscription is one event subscription: the replay, then live events.
type subscription interface {
	Next(ctx context.Context) (journal.Event, error)
	Close()
}

// supervisorBackend adapts *supervisor.Supervisor to backend; only Subscribe
// differs, by returning the interface.
type supervisorBackend struct {
	*supervisor.Supervisor
}

func (b supervisorBackend) Subscribe(ctx context.Context, r supervisor.SubscribeRequest) (subscription, error) {
	sub, err := b.Supervisor.Subscribe(ctx, r)
	if err != nil {
		return nil, err
	}
	return sub, nil
}
