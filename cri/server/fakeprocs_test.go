package server

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/specs"
	"github.com/evjournal/containerd/supervisor"
	"github.com/evjournal/containerd/supervisor/journal"
	"github.com/evjournal/containerd/supervisor/objects"
)

// The fake loop's processes (ProcessControl): the containers the
// supervisor runs for the objects, their exits and their watches.

func watchKey(id, pid string) string { return id + "\x00" + pid }

func (l *fakeLoop) WatchExit(ctx context.Context, id, pid string) (<-chan supervisor.ExitStatus, func(), error) {
	if err := l.call(ctx, "WatchExit", id); err != nil {
		return nil, nil, err
	}
	ch := make(chan supervisor.ExitStatus, 1)
	key := watchKey(id, pid)
	l.mu.Lock()
	defer l.mu.Unlock()
	if o, ok := l.table.Get(id); ok && pid == "init" && o.State == objects.Exited {
		ch <- supervisor.ExitStatus{Status: uint32(o.ExitCode), At: time.Unix(0, o.FinishedAt)}
	} else {
		l.watches[key] = append(l.watches[key], ch)
	}
	stop := func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.watches[key] = slices.DeleteFunc(l.watches[key], func(c chan supervisor.ExitStatus) bool { return c == ch })
	}
	return ch, stop, nil
}

// lookup is a live process, with the loop's errors. Called in the loop.
func (l *fakeLoop) lookup(id, pid string) (*fakeProc, error) {
	c, ok := l.ctrs[id]
	if !ok {
		return nil, supervisor.ErrContainerNotFound
	}
	p, ok := c.procs[pid]
	if !ok || p.exiting {
		return nil, supervisor.ErrProcessNotFound
	}
	return p, nil
}

// Signal delivers sig; SIGKILL, and SIGTERM unless the init ignores it,
// make the process exit with 128+sig a moment later, as a real one does.
func (l *fakeLoop) Signal(ctx context.Context, id, pid string, sig syscall.Signal) error {
	if err := l.call(ctx, "Signal", id); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	p, err := l.lookup(id, pid)
	if err != nil {
		return err
	}
	l.signals[watchKey(id, pid)] = append(l.signals[watchKey(id, pid)], sig)
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM && !(pid == "init" && l.ignoreTERM[id]) {
		p.exiting = true
		l.work.Add(1)
		go func() {
			defer l.work.Done()
			l.exitProcess(id, pid, 128+uint32(sig))
		}()
	}
	return nil
}

// exitProcess is the exit of a process (its own, or of a signal).
func (l *fakeLoop) exitProcess(id, pid string, status uint32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.exit(id, pid, status)
}

// exit emits the exit of a process and fires its watches; an init's exit
// ends its execs and frees the id. Called in the loop.
func (l *fakeLoop) exit(id, pid string, status uint32) {
	c, ok := l.ctrs[id]
	if !ok || c.procs[pid] == nil {
		return
	}
	p := c.procs[pid]
	delete(c.procs, pid)
	if pid == "init" {
		for exec := range c.procs {
			l.exit(id, exec, 137)
		}
		delete(l.ctrs, id)
	}
	if !p.ephemeral {
		l.emit(journal.Event{Type: journal.TypeExit, ID: id, Pid: pid, Status: status, Incarnation: c.incarnation})
	}
	at := time.Now()
	for _, ch := range l.watches[watchKey(id, pid)] {
		ch <- supervisor.ExitStatus{Status: status, At: at}
	}
	delete(l.watches, watchKey(id, pid))
}

// Exec runs an exec that exits 0 a moment later.
func (l *fakeLoop) Exec(ctx context.Context, r supervisor.ExecRequest) (int, error) {
	if err := l.call(ctx, "Exec", r.ID); err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.ctrs[r.ID]
	if !ok {
		return 0, supervisor.ErrContainerNotFound
	}
	if _, ok := c.procs[r.Pid]; ok {
		return 0, fmt.Errorf("process %s: %w", r.Pid, errdefs.ErrAlreadyExists)
	}
	l.lastPid++
	c.procs[r.Pid] = &fakeProc{pid: l.lastPid, ephemeral: r.Ephemeral}
	l.work.Add(1)
	go func() {
		defer l.work.Done()
		l.exitProcess(r.ID, r.Pid, 0)
	}()
	return l.lastPid, nil
}

func (l *fakeLoop) State(ctx context.Context, id string) ([]supervisor.ContainerInfo, error) {
	if err := l.call(ctx, "State", id); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []supervisor.ContainerInfo
	for cid, c := range l.ctrs {
		if id != "" && cid != id {
			continue
		}
		init := supervisor.ProcessInfo{ID: "init", SystemPid: c.procs["init"].pid, Spec: specs.ProcessSpec{Args: []string{"sleep", "inf"}}}
		out = append(out, supervisor.ContainerInfo{ID: cid, Status: supervisor.StatusRunning, Incarnation: c.incarnation,
			Processes: []supervisor.ProcessInfo{init}})
	}
	if id != "" && len(out) == 0 {
		return nil, supervisor.ErrContainerNotFound
	}
	return out, nil
}

func (l *fakeLoop) Update(ctx context.Context, r supervisor.UpdateRequest) error {
	return l.onProcess(ctx, "Update", r.ID, "init")
}

func (l *fakeLoop) UpdateProcess(ctx context.Context, r supervisor.ProcessUpdate) error {
	return l.onProcess(ctx, "UpdateProcess", r.ID, r.Pid)
}

func (l *fakeLoop) ReopenLog(ctx context.Context, id, pid string) error {
	return l.onProcess(ctx, "ReopenLog", id, pid)
}

// onProcess is a call that only needs the process to run.
func (l *fakeLoop) onProcess(ctx context.Context, what, id, pid string) error {
	if err := l.call(ctx, what, id); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.lookup(id, pid)
	return err
}

// runs says whether id's init runs (and is not dying), and the signals
// it was sent.
func (l *fakeLoop) runs(id string) (bool, []syscall.Signal) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sent := slices.Clone(l.signals[watchKey(id, "init")])
	c, ok := l.ctrs[id]
	return ok && !c.procs["init"].exiting, sent
}

// runningIDs are the ids of the containers the supervisor runs, sorted.
func (l *fakeLoop) runningIDs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for id := range l.ctrs {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}
