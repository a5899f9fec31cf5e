package server

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/supervisor"
	"github.com/evjournal/containerd/supervisor/journal"
	"github.com/evjournal/containerd/supervisor/objects"
)

// fakeLoop is the supervisor's loop as the service sees it (Loop): the
// real objects.Table, so that names, transitions and their refusals are the
// loop's own; a table of processes standing for the containers the
// supervisor runs (starts, signals, exits, execs); and a journal
// (fakeJournal) that every transition is emitted to and applied from, as
// the loop's emit does. Its mutex stands for the loop's one goroutine.
//
// Like the real loop, a call whose context ended may be refused (here it
// always is: a cleanup run with a dead context fails), a start goes on when
// its caller gives up, and a signalled process exits a moment later, not
// during the call.
type fakeLoop struct {
	f *faults
	j *fakeJournal

	mu         sync.Mutex
	table      *objects.Table                          // guarded by mu
	ctrs       map[string]*fakeCtr                     // the supervisor's containers; guarded by mu
	watches    map[string][]chan supervisor.ExitStatus // by id and pid; guarded by mu
	ignoreTERM map[string]bool                         // ids whose init lives through SIGTERM; guarded by mu
	signals    map[string][]syscall.Signal             // sent, by id and pid; guarded by mu
	lastPid    int                                     // guarded by mu
	creates    map[string]supervisor.CreateRequest     // the last start's request, by id; guarded by mu

	// work counts the starts and exits under way.
	work sync.WaitGroup
}

// fakeCtr is a container the supervisor runs for an object.
type fakeCtr struct {
	incarnation string
	procs       map[string]*fakeProc // "init" and the execs
}

type fakeProc struct {
	pid       int
	ephemeral bool
	exiting   bool // signalled to death; its exit is on its way
}

func newFakeLoop(f *faults, j *fakeJournal) *fakeLoop {
	return &fakeLoop{f: f, j: j, table: objects.NewTable(), ctrs: map[string]*fakeCtr{},
		watches: map[string][]chan supervisor.ExitStatus{}, ignoreTERM: map[string]bool{}, signals: map[string][]syscall.Signal{},
		creates: map[string]supervisor.CreateRequest{}}
}

var _ Loop = (*fakeLoop)(nil)

// call begins every method: it is logged, refused if its context ended,
// and the hook at what runs.
func (l *fakeLoop) call(ctx context.Context, what, id string) error {
	l.f.record(what, id, ctx)
	if err := ctx.Err(); err != nil {
		return err
	}
	return l.f.at(what, id)
}

// reply ends a method that acted: the hook at what+".after" may lose the
// reply (the caller then sees an error for what was done).
func (l *fakeLoop) reply(what, id string) error { return l.f.at(what+".after", id) }

// emit journals ev and applies it to the objects, in the loop.
func (l *fakeLoop) emit(ev journal.Event) {
	l.table.Apply(l.j.append(ev))
}

func (l *fakeLoop) ReserveObject(ctx context.Context, spec supervisor.ObjectSpec) error {
	if err := l.call(ctx, "ReserveObject", spec.ID); err != nil {
		return err
	}
	l.mu.Lock()
	err := l.table.Reserve(spec.Kind, spec.ID, spec.SandboxID, spec.Name)
	l.mu.Unlock()
	if err != nil {
		return err
	}
	return l.reply("ReserveObject", spec.ID)
}

func (l *fakeLoop) ReleaseObject(ctx context.Context, id string) error {
	if err := l.call(ctx, "ReleaseObject", id); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.table.Release(id)
	return nil
}

func (l *fakeLoop) CommitObject(ctx context.Context, id string) (objects.Object, error) {
	if err := l.call(ctx, "CommitObject", id); err != nil {
		return objects.Object{}, err
	}
	l.mu.Lock()
	o, ok := l.table.Get(id)
	if !ok || o.State != objects.Reserved {
		l.mu.Unlock()
		return objects.Object{}, fmt.Errorf("object %s is not reserved: %w", id, errdefs.ErrFailedPrecondition)
	}
	l.emit(objects.CreatedEvent(o))
	o = l.view(id)
	l.mu.Unlock()
	return o, l.reply("CommitObject", id)
}

// StartObject starts in a goroutine of its own that the caller's end does
// not stop, as the loop's start does.
func (l *fakeLoop) StartObject(ctx context.Context, r supervisor.CreateRequest) (objects.Object, error) {
	if err := l.call(ctx, "StartObject", r.ID); err != nil {
		return objects.Object{}, err
	}
	l.mu.Lock()
	err := l.table.BeginStart(r.ID)
	l.creates[r.ID] = r
	l.mu.Unlock()
	if err != nil {
		return objects.Object{}, err
	}
	type result struct {
		o   objects.Object
		err error
	}
	done := make(chan result, 1)
	l.work.Add(1)
	go func() {
		defer l.work.Done()
		o, err := l.start(r.ID)
		done <- result{o, err}
	}()
	select {
	case res := <-done:
		return res.o, res.err
	case <-ctx.Done():
		return objects.Object{}, ctx.Err()
	}
}

// start runs the object's process: an error at "StartObject.run" is a
// create that ran nothing (the object exits with StartError); once it runs
// and its start is journaled, "StartObject.after" comes before the reply.
func (l *fakeLoop) start(id string) (objects.Object, error) {
	if err := l.f.at("StartObject.run", id); err != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.emit(objects.StartFailedEvent(id, err.Error()))
		return l.view(id), err
	}
	l.mu.Lock()
	l.lastPid++
	c := &fakeCtr{incarnation: fmt.Sprintf("inc-%d", l.lastPid), procs: map[string]*fakeProc{"init": {pid: l.lastPid}}}
	l.ctrs[id] = c
	l.emit(journal.Event{Type: journal.TypeStartContainer, ID: id, Incarnation: c.incarnation})
	o := l.view(id)
	l.mu.Unlock()
	return o, l.f.at("StartObject.after", id)
}

// view is the object as Object shows it: with its init's pid while it
// runs. Called in the loop.
func (l *fakeLoop) view(id string) objects.Object {
	o, _ := l.table.Get(id)
	if c, ok := l.ctrs[id]; ok && o.State == objects.Running && !c.procs["init"].exiting {
		o.Pid = c.procs["init"].pid
	}
	return o
}

func (l *fakeLoop) Object(ctx context.Context, id string) (objects.Object, error) {
	if err := l.call(ctx, "Object", id); err != nil {
		return objects.Object{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if o, ok := l.table.Get(id); !ok || !o.Visible() {
		return objects.Object{}, fmt.Errorf("object %s: %w", id, errdefs.ErrNotFound)
	}
	return l.view(id), nil
}

func (l *fakeLoop) Objects(ctx context.Context) ([]objects.Object, error) {
	if err := l.call(ctx, "Objects", ""); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	list := l.table.List()
	for i := range list {
		list[i] = l.view(list[i].ID)
	}
	return list, nil
}

func (l *fakeLoop) BeginRemoveObject(ctx context.Context, id string) (objects.Object, error) {
	if err := l.call(ctx, "BeginRemoveObject", id); err != nil {
		return objects.Object{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.table.BeginRemove(id)
}

func (l *fakeLoop) AbortRemoveObject(ctx context.Context, id, why string) error {
	if err := l.call(ctx, "AbortRemoveObject", id); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.table.AbortRemove(id, why)
	return nil
}

func (l *fakeLoop) RemoveObject(ctx context.Context, id string) error {
	if err := l.call(ctx, "RemoveObject", id); err != nil {
		return err
	}
	l.mu.Lock()
	if o, ok := l.table.Get(id); ok && !o.Visible() {
		l.table.Release(id)
	} else if ok {
		l.emit(journal.Event{Type: journal.TypeCRIDeleted, ID: id})
	}
	l.mu.Unlock()
	return l.reply("RemoveObject", id)
}

func (l *fakeLoop) ImportObjects(ctx context.Context, objs []objects.Object) (int, error) {
	if err := l.call(ctx, "ImportObjects", ""); err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.table.Import(objs)
	for _, o := range l.table.List() {
		if _, ok := l.ctrs[o.ID]; o.State == objects.Running && !ok {
			l.emit(journal.Event{Type: journal.TypeExit, ID: o.ID, Pid: "init", Status: 255, Incarnation: o.Incarnation})
		}
	}
	return n, nil
}

// restart is the loop of a daemon started again: the objects come back
// from a snapshot (reservations, never journaled, are forgotten), the
// processes run on (their shims outlived the daemon), the old daemon's
// exit watches are gone.
func (l *fakeLoop) restart() {
	l.mu.Lock()
	defer l.mu.Unlock()
	data, err := l.table.Snapshot("fake", 0)
	if err != nil {
		panic(err)
	}
	loaded, err := objects.LoadSnapshot(data)
	if err != nil {
		panic(err)
	}
	l.table, l.watches = loaded.Table, map[string][]chan supervisor.ExitStatus{}
}

// objectIDs are the visible objects' ids, sorted.
func (l *fakeLoop) objectIDs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, o := range l.table.List() {
		out = append(out, o.ID)
	}
	slices.Sort(out)
	return out
}

// get is the table's copy of id, reserved or not.
func (l *fakeLoop) get(id string) (objects.Object, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.table.Get(id)
}

// created is the request of id's last start.
func (l *fakeLoop) created(id string) supervisor.CreateRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.creates[id]
}
