package supervisor

import (
	"context"

	"github.com/evjournal/containerd/runtime"
)

// Stats samples the cgroup statistics of a container (runc events --stats).
func (s *Supervisor) Stats(ctx context.Context, id string) (*runtime.Stats, error) {
	return onContainer(ctx, s, "stats", id, func(c Container) (*runtime.Stats, error) { return c.Stats(ctx) })
}

// CreateCheckpoint checkpoints a container into dir/name (dir "" =
// <bundle>/checkpoints). With Exit set the container then stops and its
// exit follows through the usual path.
func (s *Supervisor) CreateCheckpoint(ctx context.Context, id, dir string, o runtime.CheckpointOpts) error {
	_, err := call(ctx, s, "checkpoint", func(done func(struct{}, error)) {
		e, ok := s.containers[id]
		if !ok || e.c == nil {
			done(struct{}{}, ErrContainerNotFound)
			return
		}
		if err := s.admit("checkpoint"); err != nil {
			done(struct{}{}, err)
			return
		}
		s.enqueue(id, step{name: "checkpoint", kind: barrierStep,
			work:  func(context.Context) error { return e.c.Checkpoint(ctx, dir, o) },
			apply: func(err error) { done(struct{}{}, err) }})
	})
	return err
}

// DeleteCheckpoint removes a checkpoint of a live container.
func (s *Supervisor) DeleteCheckpoint(ctx context.Context, id, dir, name string) error {
	_, err := onContainer(ctx, s, "delete-checkpoint", id, func(c Container) (struct{}, error) {
		return struct{}{}, c.DeleteCheckpoint(dir, name)
	})
	return err
}

// ListCheckpoints lists the checkpoints of a live container.
func (s *Supervisor) ListCheckpoints(ctx context.Context, id, dir string) ([]runtime.Checkpoint, error) {
	return onContainer(ctx, s, "list-checkpoints", id, func(c Container) ([]runtime.Checkpoint, error) {
		return c.Checkpoints(dir)
	})
}

// onContainer looks up id in the loop and runs f on a worker; f only reads.
func onContainer[T any](ctx context.Context, s *Supervisor, kind, id string, f func(Container) (T, error)) (T, error) {
	return call(ctx, s, kind, func(done func(T, error)) {
		e, ok := s.containers[id]
		if !ok || e.c == nil {
			var zero T
			done(zero, ErrContainerNotFound)
			return
		}
		if err := s.admitRead(kind); err != nil {
			var zero T
			done(zero, err)
			return
		}
		c := e.c
		s.readLane.submit(func() { done(f(c)) })
	})
}
