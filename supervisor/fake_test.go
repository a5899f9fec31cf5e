package supervisor

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/internal/errmark"
	"github.com/evjournal/containerd/monitor"
	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/specs"
)

// fakeRuntime models containers in memory, persistent across supervisors
// (like a state dir), so restore can be tested without runc.
type fakeRuntime struct {
	mu         sync.Mutex
	live       map[string]*fakeContainer
	retired    []*fakeContainer
	failRetire map[string]int // Retire of id fails this many more times
	failStart  error
	failDelete int             // Delete fails this many more times
	failPids   map[string]bool // Pids of id fails (its cgroup is gone)
	// createGate, when set, holds every Create until it is closed: a
	// create hung in the runtime.
	createGate chan struct{}
	// execGate and updateGate hold every Exec, UpdateResources until
	// closed; execsIn counts the Execs under way (held or not).
	execGate, updateGate chan struct{}
	execsIn, updatesIn   int
	n                    int
	// runc state the fake's "runc list" shows, and what was deleted from it
	runcOrphans []runtime.RuncContainer
	runcDeleted []string
	// loadGate makes Load of an id wait until its channel is closed (a
	// load that hangs, as on a stuck file system).
	loadGate map[string]chan struct{}
	// changed is closed (and replaced) when a worker changes the fake's
	// state, so tests await work done off the loop instead of polling.
	changed chan struct{}
}

// notifyLocked wakes the tests waiting for a change; rt.mu is held.
func (r *fakeRuntime) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// waitFor waits, bounded, until cond holds, re-checking at each change.
func (r *fakeRuntime) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		r.mu.Lock()
		ch := r.changed
		r.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("%s: not within 5s", what)
		}
	}
}

func newFakeRuntime() *fakeRuntime {
	return &fakeRuntime{live: map[string]*fakeContainer{}, failRetire: map[string]int{}, changed: make(chan struct{})}
}

type fakeContainer struct {
	rt          *fakeRuntime
	id, inc     string
	procs       map[string]*fakeProcess
	retiredFlag bool
	deleted     bool
	started     bool
	created     time.Time
}

type fakeProcess struct {
	c         *fakeContainer
	id        string
	mu        sync.Mutex
	dead      bool
	status    uint32
	published bool
	started   bool
	killed    bool // signalled with SIGKILL by the supervisor
	kills     int  // how many times
	closed    int  // Close calls
	pid       int
	spec      specs.ProcessSpec // an exec's, as given to Exec
}

func (r *fakeRuntime) New(o runtime.ContainerOpts) (Container, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.live[o.ID]; ok {
		return nil, errmark.Mark(fmt.Errorf("mkdir %s: file exists", o.ID), errdefs.ErrAlreadyExists)
	}
	r.n++
	c := &fakeContainer{rt: r, id: o.ID, inc: fmt.Sprintf("inc%d", r.n), procs: map[string]*fakeProcess{}, created: time.Now()}
	r.live[o.ID] = c
	return c, nil
}

func (r *fakeRuntime) Load(root, id string) (Container, error) {
	r.mu.Lock()
	gate := r.loadGate[id]
	r.mu.Unlock()
	if gate != nil {
		<-gate
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.live[id]
	if !ok {
		return nil, fmt.Errorf("no such container %s", id)
	}
	return c, nil
}

func (r *fakeRuntime) Recover(root, id string, _ runtime.RecoverHint) (Container, error) {
	return nil, fmt.Errorf("no state to recover for %s", id)
}

func (r *fakeRuntime) ListIDs(string) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for id := range r.live {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids, nil
}

func (r *fakeRuntime) Retired(string) ([]Container, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Container
	for _, c := range r.retired {
		out = append(out, c)
	}
	return out, nil
}

func (r *fakeRuntime) SetAside(root, id, reason string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.live, id)
	return nil
}

func (r *fakeRuntime) PruneAside(string, int) ([]string, error) { return nil, nil }

func (r *fakeRuntime) ListRunc(ctx context.Context, rt string, args []string) ([]runtime.RuncContainer, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runcOrphans, nil
}

func (r *fakeRuntime) DeleteRunc(ctx context.Context, rt string, args []string, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runcDeleted = append(r.runcDeleted, id)
	r.notifyLocked()
	return nil
}

func (c *fakeContainer) ID() string          { return c.id }
func (c *fakeContainer) Bundle() string      { return "/bundle/" + c.id }
func (c *fakeContainer) Labels() []string    { return nil }
func (c *fakeContainer) Runtime() string     { return "fake" }
func (c *fakeContainer) Incarnation() string { return c.inc }
func (c *fakeContainer) Created() time.Time  { return c.created }
func (c *fakeContainer) Paused() bool        { return false }

func (c *fakeContainer) newProc(id string) *fakeProcess {
	c.rt.mu.Lock()
	defer c.rt.mu.Unlock()
	c.rt.n++
	p := &fakeProcess{c: c, id: id, pid: 1000 + c.rt.n}
	c.procs[id] = p
	return p
}

func (c *fakeContainer) Create(ctx context.Context, o runtime.CreateOpts) (Process, error) {
	c.rt.mu.Lock()
	gate := c.rt.createGate
	c.rt.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if o.Start {
		c.rt.mu.Lock()
		err := c.rt.failStart
		c.rt.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	return c.newProc("init"), nil
}

func (c *fakeContainer) Exec(ctx context.Context, pid string, spec specs.ProcessSpec, stdio runtime.Stdio, _ runtime.ExecOpts) (Process, error) {
	c.rt.mu.Lock()
	gate := c.rt.execGate
	c.rt.execsIn++
	c.rt.notifyLocked()
	c.rt.mu.Unlock()
	defer func() {
		c.rt.mu.Lock()
		c.rt.execsIn--
		c.rt.mu.Unlock()
	}()
	if gate != nil {
		<-gate
	}
	p := c.newProc(pid)
	p.spec = spec
	return p, nil
}

func (c *fakeContainer) Processes() []Process {
	c.rt.mu.Lock()
	defer c.rt.mu.Unlock()
	var out []Process
	if p, ok := c.procs["init"]; ok {
		out = append(out, p)
	}
	var ids []string
	for id := range c.procs {
		if id != "init" {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		out = append(out, c.procs[id])
	}
	return out
}

func (c *fakeContainer) RemoveProcess(pid string) error {
	c.rt.mu.Lock()
	defer c.rt.mu.Unlock()
	delete(c.procs, pid)
	c.rt.notifyLocked()
	return nil
}

func (c *fakeContainer) Pause(context.Context) error  { return nil }
func (c *fakeContainer) Resume(context.Context) error { return nil }
func (c *fakeContainer) Pids(context.Context) ([]int, error) {
	c.rt.mu.Lock()
	defer c.rt.mu.Unlock()
	if c.rt.failPids[c.id] {
		return nil, errors.New("open cgroup.procs: no such file or directory")
	}
	return []int{c.procs["init"].pid}, nil
}
func (c *fakeContainer) OOMCgroups() (string, string)                  { return "/fake/memory/" + c.id, "" }
func (c *fakeContainer) OOMBaseline(string) (uint64, bool)             { return 0, false }
func (c *fakeContainer) Stats(context.Context) (*runtime.Stats, error) { return &runtime.Stats{}, nil }
func (c *fakeContainer) UpdateResources(context.Context, *specs.LinuxResources) error {
	c.rt.mu.Lock()
	gate := c.rt.updateGate
	c.rt.updatesIn++
	c.rt.notifyLocked()
	c.rt.mu.Unlock()
	defer func() {
		c.rt.mu.Lock()
		c.rt.updatesIn--
		c.rt.mu.Unlock()
	}()
	if gate != nil {
		<-gate
	}
	return nil
}
func (c *fakeContainer) Checkpoint(context.Context, string, runtime.CheckpointOpts) error {
	return errors.New("not supported by the fake")
}
func (c *fakeContainer) Checkpoints(string) ([]runtime.Checkpoint, error) { return nil, nil }
func (c *fakeContainer) DeleteCheckpoint(string, string) error            { return nil }

func (c *fakeContainer) MarkStarted() error {
	c.rt.mu.Lock()
	defer c.rt.mu.Unlock()
	c.started = true
	c.rt.notifyLocked()
	return nil
}

func (c *fakeContainer) Started() bool {
	c.rt.mu.Lock()
	defer c.rt.mu.Unlock()
	return c.started
}

func (c *fakeContainer) Retire() error {
	c.rt.mu.Lock()
	defer c.rt.mu.Unlock()
	if c.retiredFlag {
		return nil
	}
	if c.rt.failRetire[c.id] > 0 {
		c.rt.failRetire[c.id]--
		return errors.New("injected retire failure")
	}
	c.retiredFlag = true
	if c.rt.live[c.id] == c {
		delete(c.rt.live, c.id)
	}
	c.rt.retired = append(c.rt.retired, c)
	return nil
}

func (c *fakeContainer) DeleteAbandoned(ctx context.Context) error { return c.Delete(ctx) }

func (c *fakeContainer) Delete(context.Context) error {
	c.rt.mu.Lock()
	defer c.rt.mu.Unlock()
	if c.rt.failDelete > 0 {
		c.rt.failDelete--
		return errors.New("injected delete failure")
	}
	c.deleted = true
	c.rt.notifyLocked()
	if c.rt.live[c.id] == c {
		delete(c.rt.live, c.id)
	}
	for i, r := range c.rt.retired {
		if r == c {
			c.rt.retired = append(c.rt.retired[:i], c.rt.retired[i+1:]...)
			break
		}
	}
	return nil
}

// Discard is Delete without the injected failures.
func (c *fakeContainer) Discard() error {
	c.rt.mu.Lock()
	n := c.rt.failDelete
	c.rt.failDelete = 0
	c.rt.mu.Unlock()
	err := c.Delete(context.Background())
	c.rt.mu.Lock()
	c.rt.failDelete = n
	c.rt.mu.Unlock()
	return err
}

func (p *fakeProcess) ExitFD() int    { return -1 }
func (p *fakeProcess) ID() string     { return p.id }
func (p *fakeProcess) SystemPid() int { return p.pid }
func (p *fakeProcess) State() runtime.ProcessState {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead {
		return runtime.Stopped
	}
	return runtime.Running
}
func (p *fakeProcess) ExitStatus() (uint32, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status, ""
}

// ExitTime: the fake has no shim to stamp a reap time.
func (p *fakeProcess) ExitTime() time.Time { return time.Time{} }
func (p *fakeProcess) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sig == syscall.SIGKILL {
		p.killed = true
		p.kills++
	}
	return nil
}
func (p *fakeProcess) Resize(w, h uint32) error { return nil }
func (p *fakeProcess) CloseStdin() error        { return nil }
func (p *fakeProcess) Spec() specs.ProcessSpec  { return p.spec }
func (p *fakeProcess) Stdio() runtime.Stdio     { return runtime.Stdio{} }

// ReopenLog: the fake's processes have no log path.
func (p *fakeProcess) ReopenLog(ctx context.Context) error {
	return fmt.Errorf("container %q: process %q has no log path: %w", p.c.id, p.id, errdefs.ErrFailedPrecondition)
}

func (p *fakeProcess) MarkExitPublished() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.published = true
	return nil
}
func (p *fakeProcess) ExitPublished() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.published
}
func (p *fakeProcess) Close() error {
	p.mu.Lock()
	p.closed++
	p.mu.Unlock()
	p.c.rt.mu.Lock()
	defer p.c.rt.mu.Unlock()
	p.c.rt.notifyLocked()
	return nil
}

func (p *fakeProcess) MarkStarted() error {
	p.mu.Lock()
	p.started = true
	p.mu.Unlock()
	p.c.rt.mu.Lock()
	defer p.c.rt.mu.Unlock()
	p.c.rt.notifyLocked()
	return nil
}

func (p *fakeProcess) Started() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.started
}

// die marks the process dead with status, as a shim would.
func (p *fakeProcess) die(status uint32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dead, p.status = true, status
}

// fakeMonitor hands exits and OOMs to the loop when the test says so, and
// records the OOM watches the supervisor starts and stops.
type fakeMonitor struct {
	exits  chan monitor.ExitSource
	ooms   chan string
	closed chan struct{}
	once   sync.Once

	mu         sync.Mutex
	oomWatched []string // MonitorOOM calls, by container id
	oomStopped []string // StopOOM calls
}

func newFakeMonitor() *fakeMonitor {
	return &fakeMonitor{exits: make(chan monitor.ExitSource), ooms: make(chan string), closed: make(chan struct{})}
}

func (m *fakeMonitor) Monitor(monitor.ExitSource) error { return nil }
func (m *fakeMonitor) MonitorOOM(src monitor.OOMSource) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.oomWatched = append(m.oomWatched, src.ID)
	return nil
}

func (m *fakeMonitor) StopOOM(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.oomStopped = append(m.oomStopped, id)
}

// oomCalls returns copies of the MonitorOOM and StopOOM calls so far.
func (m *fakeMonitor) oomCalls() (watched, stopped []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.oomWatched...), append([]string(nil), m.oomStopped...)
}
func (m *fakeMonitor) Exits() <-chan monitor.ExitSource { return m.exits }
func (m *fakeMonitor) OOMs() <-chan string              { return m.ooms }
func (m *fakeMonitor) Count() int                       { return 0 }
func (m *fakeMonitor) Close() error                     { m.once.Do(func() { close(m.closed) }); return nil }

// fakeClock fires timers only when the test advances it.
type fakeClock struct {
	armed  chan time.Duration // every AfterFunc reports its delay here
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at      time.Time
	f       func()
	stopped bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), armed: make(chan time.Duration, 1024)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	select {
	case c.armed <- d:
	default:
	}
	return func() { c.mu.Lock(); t.stopped = true; c.mu.Unlock() }
}

// Advance moves time forward and fires the timers that are due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	var rest []*fakeTimer
	for _, t := range c.timers {
		if !t.stopped && !t.at.After(c.now) {
			due = append(due, t)
		} else if !t.stopped {
			rest = append(rest, t)
		}
	}
	c.timers = rest
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
}

// Pending is the number of armed timers due within d from now.
func (c *fakeClock) Pending(d time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.stopped && !t.at.After(c.now.Add(d)) {
			n++
		}
	}
	return n
}

// proc returns a process of c under the runtime's lock.
func (c *fakeContainer) proc(id string) *fakeProcess {
	c.rt.mu.Lock()
	defer c.rt.mu.Unlock()
	return c.procs[id]
}

func (c *fakeContainer) isDeleted() bool {
	c.rt.mu.Lock()
	defer c.rt.mu.Unlock()
	return c.deleted
}

func (c *fakeContainer) Records() Records { return fakeRecords{c} }

// fakeRecords keeps the markers on the fake container and processes.
type fakeRecords struct{ c *fakeContainer }

func (r fakeRecords) proc(pid string) (*fakeProcess, error) {
	r.c.rt.mu.Lock()
	defer r.c.rt.mu.Unlock()
	p, ok := r.c.procs[pid]
	if !ok {
		return nil, fmt.Errorf("no process %q", pid)
	}
	return p, nil
}

func (r fakeRecords) MarkStarted(pid string) error {
	if pid == "init" {
		return r.c.MarkStarted()
	}
	p, err := r.proc(pid)
	if err != nil {
		return err
	}
	return p.MarkStarted()
}

func (r fakeRecords) Started(pid string) bool {
	if pid == "init" {
		return r.c.Started()
	}
	p, err := r.proc(pid)
	return err == nil && p.Started()
}

func (r fakeRecords) MarkExitPublished(pid string) error {
	p, err := r.proc(pid)
	if err != nil {
		return err
	}
	return p.MarkExitPublished()
}

func (r fakeRecords) ExitPublished(pid string) bool {
	p, err := r.proc(pid)
	return err == nil && p.ExitPublished()
}
