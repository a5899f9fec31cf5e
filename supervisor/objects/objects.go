// Package objects is the lifecycle state of the CRI service's pods and
// containers: what the supervisor's loop owns for them beside the container
// it runs. It is a plain table with checked transitions and no locking: the
// loop is its only user (supervisor/cri.go), the CRI service only ever sees
// copies. Every transition that must survive a crash has a journal event
// (Apply replays them), and the whole table is checkpointed in a snapshot
// (snapshot.go) so that the journal may drop what is older.
//
// Kept apart from the loop so that the state machine is tested without a
// loop, a journal or a runtime (objects_test.go).
package objects

import (
	"fmt"
	"sort"
	"time"

	"github.com/containerd/errdefs"
)

// Kind tells a pod (its pause process) from a container of a pod.
type Kind string

const (
	Sandbox   Kind = "sandbox"
	Container Kind = "container"
)

// State is where an object is in its life. Starting and removing are flags
// beside it (Object.Starting, Object.Removing), as in containerd's CRI
// plugin: a container being started is still created to a reader, and one
// being removed keeps the state it had.
type State string

const (
	// Reserved: the name is taken, the object is being made and is not
	// visible yet; a crash forgets it (nothing was journaled).
	Reserved State = "reserved"
	// Created: journaled (cri-created), visible, no process started.
	Created State = "created"
	// Running: its process was started (start-container journaled).
	Running State = "running"
	// Exited: its process exited, or its start failed.
	Exited State = "exited"
)

// Object is one pod or container as the loop knows it. The JSON form is the
// snapshot's.
type Object struct {
	ID        string `json:"id"`
	Kind      Kind   `json:"kind"`
	SandboxID string `json:"sandboxId,omitempty"` // a container's pod
	// Name is the reservation key: no two objects share it (kubelet's
	// name, namespace, uid and attempt of a pod; pod, name and attempt of a
	// container).
	Name  string `json:"name"`
	State State  `json:"state"`
	// Starting: StartContainer/RunPodSandbox is running the process.
	Starting bool `json:"-"`
	// Removing: a removal is under way; starts are refused.
	Removing   bool   `json:"-"`
	CreatedAt  int64  `json:"createdAt"`
	StartedAt  int64  `json:"startedAt,omitempty"`
	FinishedAt int64  `json:"finishedAt,omitempty"`
	ExitCode   int32  `json:"exitCode,omitempty"`
	Reason     string `json:"reason,omitempty"`
	Message    string `json:"message,omitempty"`
	// Pid is the host pid of the object's init while it runs.
	Pid int `json:"pid,omitempty"`
	// Incarnation is the supervisor container's, once started: events of
	// another incarnation of the id are not this object's.
	Incarnation string `json:"incarnation,omitempty"`
	OOMKilled   bool   `json:"oomKilled,omitempty"`
	// CleanupError is why the last removal failed; the object stays
	// visible so that kubelet retries it.
	CleanupError string `json:"cleanupError,omitempty"`
}

// Visible says whether readers see the object (it was committed).
func (o *Object) Visible() bool { return o.State != Reserved }

// Table is every object by id, with the names they hold. Not safe for
// concurrent use: the loop owns it.
type Table struct {
	objs  map[string]*Object
	names map[string]string // name -> id
	// dirty: changed since the last snapshot was taken.
	dirty bool
}

// NewTable returns an empty table.
func NewTable() *Table {
	return &Table{objs: map[string]*Object{}, names: map[string]string{}}
}

// Get returns a copy of the object with id.
func (t *Table) Get(id string) (Object, bool) {
	o, ok := t.objs[id]
	if !ok {
		return Object{}, false
	}
	return *o, true
}

// List returns copies of the visible objects, oldest first.
func (t *Table) List() []Object {
	out := make([]Object, 0, len(t.objs))
	for _, o := range t.objs {
		if o.Visible() {
			out = append(out, *o)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CreatedAt != out[j].CreatedAt {
			return out[i].CreatedAt < out[j].CreatedAt
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Len is the number of objects, reserved ones included.
func (t *Table) Len() int { return len(t.objs) }

// Dirty reports whether the table changed since MarkClean.
func (t *Table) Dirty() bool { return t.dirty }

// MarkClean records that a snapshot of the current table was taken.
func (t *Table) MarkClean() { t.dirty = false }

// MarkDirty asks for a snapshot (one taken was not written).
func (t *Table) MarkDirty() { t.dirty = true }

// Reserve takes name for a new object id of kind (a container names its
// pod). The object is not visible until Commit.
func (t *Table) Reserve(kind Kind, id, sandboxID, name string) error {
	if kind != Sandbox && kind != Container {
		return fmt.Errorf("object %s: kind %q: %w", id, kind, errdefs.ErrInvalidArgument)
	}
	if id == "" || name == "" {
		return fmt.Errorf("object: id and name are required: %w", errdefs.ErrInvalidArgument)
	}
	if _, ok := t.objs[id]; ok {
		return fmt.Errorf("object %s exists already: %w", id, errdefs.ErrAlreadyExists)
	}
	if holder, ok := t.names[name]; ok {
		return &NameTakenError{Name: name, Holder: holder}
	}
	if kind == Container {
		if sb, ok := t.objs[sandboxID]; !ok || sb.Kind != Sandbox || !sb.Visible() {
			return fmt.Errorf("pod sandbox %s: %w", sandboxID, errdefs.ErrNotFound)
		} else if sb.Removing {
			return fmt.Errorf("pod sandbox %s is being removed: %w", sandboxID, errdefs.ErrFailedPrecondition)
		}
	}
	t.objs[id] = &Object{ID: id, Kind: kind, SandboxID: sandboxID, Name: name, State: Reserved}
	t.names[name] = id
	return nil
}

// NameTakenError is a reservation refused because another object holds the
// name; it names that object, which kubelet's error message shows.
type NameTakenError struct{ Name, Holder string }

func (e *NameTakenError) Error() string {
	return fmt.Sprintf("name %q is reserved for %s", e.Name, e.Holder)
}

// Is classifies the error as AlreadyExists.
func (e *NameTakenError) Is(target error) bool { return target == errdefs.ErrAlreadyExists }

// Release forgets a reserved object that was never committed.
func (t *Table) Release(id string) {
	o, ok := t.objs[id]
	if !ok || o.State != Reserved {
		return
	}
	t.forget(o)
}

// Commit makes a reserved object visible, created at at.
func (t *Table) Commit(id string, at time.Time) error {
	o, err := t.find(id)
	if err != nil {
		return err
	}
	if o.State != Reserved {
		return fmt.Errorf("object %s is %s, not reserved: %w", id, o.State, errdefs.ErrFailedPrecondition)
	}
	o.State, o.CreatedAt = Created, at.UnixNano()
	t.dirty = true
	return nil
}

// BeginStart marks a created object as starting; a second start, a start
// of what runs or ran, or one during a removal is refused.
func (t *Table) BeginStart(id string) error {
	o, err := t.findVisible(id)
	if err != nil {
		return err
	}
	switch {
	case o.Removing:
		return fmt.Errorf("%s %s is being removed: %w", o.Kind, id, errdefs.ErrFailedPrecondition)
	case o.Starting:
		return fmt.Errorf("%s %s is being started already: %w", o.Kind, id, errdefs.ErrFailedPrecondition)
	case o.State != Created:
		return fmt.Errorf("%s %s is %s, not created: %w", o.Kind, id, o.State, errdefs.ErrFailedPrecondition)
	}
	if o.Kind == Container {
		if sb, ok := t.objs[o.SandboxID]; !ok || sb.State != Running || sb.Removing {
			return fmt.Errorf("container %s: its pod sandbox %s is not ready: %w", id, o.SandboxID, errdefs.ErrFailedPrecondition)
		}
	}
	o.Starting = true
	return nil
}

// Started records that the object's process runs: incarnation is the
// supervisor container's. It applies to a created object only (an event
// replayed over a later state changes nothing).
func (t *Table) Started(id, incarnation string, pid int, at time.Time) bool {
	o, ok := t.objs[id]
	if !ok || o.State != Created {
		return false
	}
	o.Starting = false
	o.State, o.Incarnation, o.Pid, o.StartedAt = Running, incarnation, pid, at.UnixNano()
	t.dirty = true
	return true
}

// StartFailed records a start that ran no process (exit code 128,
// StartError, as containerd reports it).
func (t *Table) StartFailed(id, message string, at time.Time) bool {
	o, ok := t.objs[id]
	if !ok || o.State != Created {
		return false
	}
	o.Starting = false
	o.State, o.ExitCode, o.Reason, o.Message, o.FinishedAt = Exited, 128, "StartError", message, at.UnixNano()
	t.dirty = true
	return true
}

// AbortStart clears the starting flag when a start ended without a
// verdict (the supervisor refused it before running anything).
func (t *Table) AbortStart(id string) {
	if o, ok := t.objs[id]; ok {
		o.Starting = false
	}
}

// Exit records the exit of the object's process of incarnation (empty:
// whatever runs). It reports whether the object changed: an exit of
// another incarnation, or one replayed over an exit, changes nothing.
func (t *Table) Exit(id, incarnation string, status uint32, at time.Time, message string) bool {
	o, ok := t.objs[id]
	if !ok || o.State != Running || (incarnation != "" && o.Incarnation != "" && incarnation != o.Incarnation) {
		return false
	}
	o.State, o.ExitCode, o.FinishedAt, o.Pid, o.Message = Exited, int32(status), at.UnixNano(), 0, message
	switch {
	case o.OOMKilled:
		o.Reason = "OOMKilled"
	case status == 0:
		o.Reason = "Completed"
	default:
		o.Reason = "Error"
	}
	t.dirty = true
	return true
}

// OOM records an OOM kill in a running object of incarnation.
func (t *Table) OOM(id, incarnation string) bool {
	o, ok := t.objs[id]
	if !ok || o.State != Running || (incarnation != "" && o.Incarnation != "" && incarnation != o.Incarnation) || o.OOMKilled {
		return false
	}
	o.OOMKilled = true
	t.dirty = true
	return true
}

// BeginRemove marks an object as being removed: starts are refused from
// now on. A running object is refused (stop it first); a pod is refused
// while it has containers.
func (t *Table) BeginRemove(id string) (Object, error) {
	o, err := t.findVisible(id)
	if err != nil {
		return Object{}, err
	}
	if o.State == Running {
		return Object{}, fmt.Errorf("%s %s still runs: %w", o.Kind, id, errdefs.ErrFailedPrecondition)
	}
	if o.Starting {
		return Object{}, fmt.Errorf("%s %s is being started: %w", o.Kind, id, errdefs.ErrFailedPrecondition)
	}
	if o.Kind == Sandbox {
		for _, c := range t.objs {
			if c.SandboxID == id {
				return Object{}, fmt.Errorf("pod sandbox %s still has container %s: %w", id, c.ID, errdefs.ErrFailedPrecondition)
			}
		}
	}
	o.Removing = true
	return *o, nil
}

// AbortRemove ends a removal that failed: the object stays, with why.
func (t *Table) AbortRemove(id, why string) {
	if o, ok := t.objs[id]; ok {
		o.Removing, o.CleanupError = false, why
		t.dirty = true
	}
}

// Remove forgets an object and frees its name (cri-deleted).
func (t *Table) Remove(id string) bool {
	o, ok := t.objs[id]
	if !ok {
		return false
	}
	t.forget(o)
	t.dirty = true
	return true
}

func (t *Table) forget(o *Object) {
	delete(t.objs, o.ID)
	if t.names[o.Name] == o.ID {
		delete(t.names, o.Name)
	}
}

func (t *Table) find(id string) (*Object, error) {
	o, ok := t.objs[id]
	if !ok {
		return nil, fmt.Errorf("object %s: %w", id, errdefs.ErrNotFound)
	}
	return o, nil
}

func (t *Table) findVisible(id string) (*Object, error) {
	o, ok := t.objs[id]
	if !ok || !o.Visible() {
		return nil, fmt.Errorf("object %s: %w", id, errdefs.ErrNotFound)
	}
	return o, nil
}

// put adds a whole object (snapshot load, import); one with a taken id or
// name is refused.
func (t *Table) put(o Object) error {
	if _, ok := t.objs[o.ID]; ok {
		return fmt.Errorf("object %s twice: %w", o.ID, errdefs.ErrAlreadyExists)
	}
	if holder, ok := t.names[o.Name]; ok {
		return &NameTakenError{Name: o.Name, Holder: holder}
	}
	o.Starting, o.Removing = false, false
	t.objs[o.ID] = &o
	t.names[o.Name] = o.ID
	return nil
}

// Import adds objects written by an older daemon (records of its own);
// ones already known are left alone.
func (t *Table) Import(objs []Object) (added int) {
	for _, o := range objs {
		if o.State == Reserved || o.ID == "" || o.Name == "" {
			continue
		}
		if t.put(o) == nil {
			added++
			t.dirty = true
		}
	}
	return added
}
