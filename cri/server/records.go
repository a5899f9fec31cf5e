package server

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/supervisor"
	"github.com/evjournal/containerd/supervisor/objects"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// sandbox is one pod's record and decoded config: immutable once made,
// but for the resources kubelet last gave it, behind their own lock.
type sandbox struct {
	rec sandboxRecord
	cfg *runtimeapi.PodSandboxConfig
	res *liveResources[*podResources] // resources.go
}

// container is one CRI container's record and decoded config: immutable,
// but for its current resources, behind their own lock.
type container struct {
	rec containerRecord
	cfg *runtimeapi.ContainerConfig
	res *liveResources[*runtimeapi.LinuxContainerResources] // resources.go
}

// records is the service's cache of the records on disk, by id. Its maps
// change when an object is made or removed; what they hold never changes.
// Recently removed records are kept a while (tombstones) so that the
// DELETED event of an object can still carry its pod's status.
type records struct {
	mu         sync.Mutex
	sandboxes  map[string]*sandbox   // guarded by mu
	containers map[string]*container // guarded by mu
	tombstones map[string]tombstone  // guarded by mu
}

type tombstone struct {
	sb *sandbox
	c  *container
	at time.Time
}

// tombstoneAge is how long a removed record is kept for events: the age
// bound of an events stream's backlog.
const tombstoneAge = eventBacklogAge

func newRecords() *records {
	return &records{sandboxes: map[string]*sandbox{}, containers: map[string]*container{}, tombstones: map[string]tombstone{}}
}

func (r *records) addSandbox(sb *sandbox) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sandboxes[sb.rec.ID] = sb
}

func (r *records) addContainer(c *container) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.containers[c.rec.ID] = c
}

// remove drops id's record, keeping it as a tombstone.
func (r *records) remove(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	for k, t := range r.tombstones {
		if now.Sub(t.at) > tombstoneAge {
			delete(r.tombstones, k)
		}
	}
	if sb, ok := r.sandboxes[id]; ok {
		r.tombstones[id] = tombstone{sb: sb, at: now}
		delete(r.sandboxes, id)
	}
	if c, ok := r.containers[id]; ok {
		r.tombstones[id] = tombstone{c: c, at: now}
		delete(r.containers, id)
	}
}

// sandbox finds a pod by id or unique prefix (at least 8 characters, as
// crictl allows); an ambiguous prefix is InvalidArgument.
func (r *records) sandbox(id string) (*sandbox, error) {
	if id == "" {
		return nil, fmt.Errorf("pod sandbox id is empty: %w", errdefs.ErrInvalidArgument)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	sb, err := byIDOrPrefix(r.sandboxes, id, "pod sandbox")
	return sb, err
}

// container finds a container by id or unique prefix.
func (r *records) container(id string) (*container, error) {
	if id == "" {
		return nil, fmt.Errorf("container id is empty: %w", errdefs.ErrInvalidArgument)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return byIDOrPrefix(r.containers, id, "container")
}

func byIDOrPrefix[T any](m map[string]*T, id, what string) (*T, error) {
	if v, ok := m[id]; ok {
		return v, nil
	}
	var found *T
	var first string
	if len(id) >= 8 {
		for full, v := range m {
			if !strings.HasPrefix(full, id) {
				continue
			}
			if found != nil {
				return nil, fmt.Errorf("%s id prefix %q is ambiguous (%s, %s, ...): %w", what, id, first, full, errdefs.ErrInvalidArgument)
			}
			found, first = v, full
		}
	}
	if found == nil {
		return nil, fmt.Errorf("%s %q: %w", what, id, errdefs.ErrNotFound)
	}
	return found, nil
}

// containersOf lists the containers of a pod.
func (r *records) containersOf(sandboxID string) []*container {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*container
	for _, c := range r.containers {
		if c.rec.SandboxID == sandboxID {
			out = append(out, c)
		}
	}
	return out
}

// allSandboxes and allContainers are copies of the maps' values.
func (r *records) allSandboxes() []*sandbox {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*sandbox, 0, len(r.sandboxes))
	for _, sb := range r.sandboxes {
		out = append(out, sb)
	}
	return out
}

func (r *records) allContainers() []*container {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*container, 0, len(r.containers))
	for _, c := range r.containers {
		out = append(out, c)
	}
	return out
}

// lookup finds id among the live records and the tombstones.
func (r *records) lookup(id string) (*sandbox, *container) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sb, ok := r.sandboxes[id]; ok {
		return sb, nil
	}
	if c, ok := r.containers[id]; ok {
		return nil, c
	}
	t := r.tombstones[id]
	return t.sb, t.c
}

// sandboxOf is the pod of a container, live or recently removed.
func (r *records) sandboxOf(c *container) *sandbox {
	sb, _ := r.lookup(c.rec.SandboxID)
	return sb
}

// Names reserved in the loop: kubelet's identity of a pod attempt and of a
// container attempt in its pod.
func sandboxName(m *runtimeapi.PodSandboxMetadata) string {
	return fmt.Sprintf("pod/%s/%s/%s/%d", m.GetNamespace(), m.GetName(), m.GetUid(), m.GetAttempt())
}

func containerName(sandboxID string, m *runtimeapi.ContainerMetadata) string {
	return fmt.Sprintf("container/%s/%s/%d", sandboxID, m.GetName(), m.GetAttempt())
}

// reserve takes spec's name in the loop. When the caller's context ended
// during the call, the loop may have reserved without the reply coming
// back: the reservation is released with a context of its own, or the name
// would stay taken until a restart. Releasing what holds nothing is a no-op.
func (s *Server) reserve(ctx context.Context, spec supervisor.ObjectSpec) error {
	err := s.sup.ReserveObject(ctx, spec)
	if err != nil && ctx.Err() != nil {
		undo := &undoList{}
		undo.add("release the name", func(ctx context.Context) error { return s.sup.ReleaseObject(ctx, spec.ID) })
		undo.run(s.log.WithField("id", spec.ID))
	}
	return err
}

// forgetObject undoes a reservation: released, or removed when the loop
// committed it but the reply was lost (the caller's context ended).
func (s *Server) forgetObject(ctx context.Context, id string) error {
	return s.sup.RemoveObject(ctx, id)
}

// objectOf asks the loop for id's lifecycle; an object the loop does not
// know (removed meanwhile) is NotFound.
func (s *Server) objectOf(ctx context.Context, id string) (objects.Object, error) {
	return s.sup.Object(ctx, id)
}

// objectMap is every object the loop has, by id: one loop turn for a list.
func (s *Server) objectMap(ctx context.Context) (map[string]objects.Object, error) {
	l, err := s.sup.Objects(ctx)
	if err != nil {
		return nil, err
	}
	m := make(map[string]objects.Object, len(l))
	for _, o := range l {
		m[o.ID] = o
	}
	return m, nil
}

// runningContainer resolves a container id (or unique prefix) that the
// loop says runs; another state is FailedPrecondition naming it.
func (s *Server) runningContainer(ctx context.Context, idOrPrefix string) (string, error) {
	c, err := s.recs.container(idOrPrefix)
	if err != nil {
		return "", err
	}
	o, err := s.objectOf(ctx, c.rec.ID)
	if err != nil {
		return "", fmt.Errorf("container %s: %w", c.rec.ID, err)
	}
	if o.State != objects.Running {
		return "", fmt.Errorf("container %s is %s, not running: %w", c.rec.ID, o.State, errdefs.ErrFailedPrecondition)
	}
	return c.rec.ID, nil
}
