package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/evjournal/containerd/monitor"
	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/specs"
	"github.com/evjournal/containerd/supervisor"
)

// recorder is what the fake runtime saw of the last request: the fuzz
// targets compare it with the request they sent.
type recorder struct {
	mu        sync.Mutex
	created   []runtime.ContainerOpts
	execs     []execCall
	resources []*specs.LinuxResources
	bad       []string // contract violations seen below the API
}

type execCall struct {
	id, pid string
	spec    specs.ProcessSpec
	stdio   runtime.Stdio
}

func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.created, r.execs, r.resources, r.bad = nil, nil, nil, nil
}

func (r *recorder) violation(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bad = append(r.bad, fmt.Sprintf(format, a...))
}

// The fakes embed the interface they implement (as a nil value): a method
// the supervisor adds later compiles at once and panics only if called, so
// a change of the supervisor's interfaces never breaks the build here.

// fakeRuntime creates containers that exist only in memory.
type fakeRuntime struct {
	// implements supervisor.Runtime without embedding it: a method added there
	// must fail this build, not panic in the middle of a fuzz run
	rec *recorder
}

func (f fakeRuntime) New(o runtime.ContainerOpts) (supervisor.Container, error) {
	if err := runtime.ValidateID(o.ID); err != nil {
		f.rec.violation("runtime.New got invalid id %q", o.ID)
	}
	f.rec.mu.Lock()
	f.rec.created = append(f.rec.created, o)
	f.rec.mu.Unlock()
	return &fakeContainer{rec: f.rec, opts: o}, nil
}

func (fakeRuntime) Load(root, id string) (supervisor.Container, error) {
	return nil, errors.New("no state")
}
func (fakeRuntime) Recover(root, id string, _ runtime.RecoverHint) (supervisor.Container, error) {
	return nil, errors.New("no state")
}
func (fakeRuntime) ListIDs(string) ([]string, error)               { return nil, nil }
func (fakeRuntime) Retired(string) ([]supervisor.Container, error) { return nil, nil }
func (fakeRuntime) SetAside(root, id, reason string) error         { return nil }
func (fakeRuntime) PruneAside(string, int) ([]string, error)       { return nil, nil }
func (fakeRuntime) ListRunc(context.Context, string, []string) ([]runtime.RuncContainer, error) {
	return nil, nil
}
func (fakeRuntime) DeleteRunc(context.Context, string, []string, string) error { return nil }

type fakeContainer struct {
	// implements supervisor.Container (no embedding, see fakeRuntime)
	rec   *recorder
	opts  runtime.ContainerOpts
	mu    sync.Mutex
	procs []supervisor.Process
}

func (c *fakeContainer) ID() string          { return c.opts.ID }
func (c *fakeContainer) Bundle() string      { return c.opts.Bundle }
func (c *fakeContainer) Labels() []string    { return c.opts.Labels }
func (c *fakeContainer) Runtime() string     { return c.opts.Runtime }
func (c *fakeContainer) Incarnation() string { return "1" }
func (c *fakeContainer) Created() time.Time  { return time.Time{} }
func (c *fakeContainer) Paused() bool        { return false }

func (c *fakeContainer) Create(ctx context.Context, o runtime.CreateOpts) (supervisor.Process, error) {
	p := &fakeProcess{ctr: c.opts.ID, id: "init", stdio: o.Stdio}
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return p, nil
}

func (c *fakeContainer) Exec(ctx context.Context, pid string, spec specs.ProcessSpec, stdio runtime.Stdio, _ runtime.ExecOpts) (supervisor.Process, error) {
	if err := runtime.ValidateID(pid); err != nil {
		c.rec.violation("Exec got invalid pid %q", pid)
	}
	c.rec.mu.Lock()
	c.rec.execs = append(c.rec.execs, execCall{id: c.opts.ID, pid: pid, spec: spec, stdio: stdio})
	c.rec.mu.Unlock()
	p := &fakeProcess{ctr: c.opts.ID, id: pid, spec: spec, stdio: stdio}
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return p, nil
}

func (c *fakeContainer) Processes() []supervisor.Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]supervisor.Process(nil), c.procs...)
}

func (c *fakeContainer) RemoveProcess(string) error                    { return nil }
func (c *fakeContainer) Pause(context.Context) error                   { return nil }
func (c *fakeContainer) Resume(context.Context) error                  { return nil }
func (c *fakeContainer) Pids(context.Context) ([]int, error)           { return []int{4242}, nil }
func (c *fakeContainer) Stats(context.Context) (*runtime.Stats, error) { return &runtime.Stats{}, nil }
func (c *fakeContainer) UpdateResources(ctx context.Context, r *specs.LinuxResources) error {
	c.rec.mu.Lock()
	c.rec.resources = append(c.rec.resources, r)
	c.rec.mu.Unlock()
	return nil
}
func (c *fakeContainer) Checkpoint(context.Context, string, runtime.CheckpointOpts) error {
	return errors.New("checkpoint not supported by the fake")
}
func (c *fakeContainer) Checkpoints(string) ([]runtime.Checkpoint, error) { return nil, nil }

// DeleteCheckpoint validates the name as the real runtime does (the layer
// that builds the path): the API must pass that refusal on as such.
func (c *fakeContainer) DeleteCheckpoint(dir, name string) error {
	return runtime.ValidateID(name)
}
func (c *fakeContainer) OOMCgroups() (string, string)          { return "", "" }
func (c *fakeContainer) OOMBaseline(string) (uint64, bool)     { return 0, false }
func (c *fakeContainer) Retire() error                         { return nil }
func (c *fakeContainer) Records() supervisor.Records           { return fakeRecords{} }
func (c *fakeContainer) Delete(context.Context) error          { return nil }
func (c *fakeContainer) DeleteAbandoned(context.Context) error { return nil }
func (c *fakeContainer) Discard() error                        { return nil }

type fakeProcess struct {
	// implements supervisor.Process (no embedding, see fakeRuntime)
	ctr   string
	id    string
	spec  specs.ProcessSpec
	stdio runtime.Stdio
}

func (p *fakeProcess) ExitFD() int                     { return -1 }
func (p *fakeProcess) ID() string                      { return p.id }
func (p *fakeProcess) SystemPid() int                  { return 4242 }
func (p *fakeProcess) State() runtime.ProcessState     { return runtime.Running }
func (p *fakeProcess) ExitStatus() (uint32, string)    { return 0, "" }
func (p *fakeProcess) ExitTime() time.Time             { return time.Time{} }
func (p *fakeProcess) Signal(syscall.Signal) error     { return nil }
func (p *fakeProcess) Resize(w, h uint32) error        { return nil }
func (p *fakeProcess) CloseStdin() error               { return nil }
func (p *fakeProcess) ReopenLog(context.Context) error { return nil }
func (p *fakeProcess) Spec() specs.ProcessSpec         { return p.spec }
func (p *fakeProcess) Stdio() runtime.Stdio            { return p.stdio }
func (p *fakeProcess) Close() error                    { return nil }

// fakeMonitor reports every process as exited at once, except the init and
// e1 of c1, which live for ever: the fuzzed creates and execs come and go,
// so the supervisor's state stays small however long the fuzzing runs.
type fakeMonitor struct {
	exits chan monitor.ExitSource
	ooms  chan string
}

func newFakeMonitor() *fakeMonitor {
	return &fakeMonitor{exits: make(chan monitor.ExitSource), ooms: make(chan string)}
}

func (m *fakeMonitor) Monitor(s monitor.ExitSource) error {
	if p, ok := s.(*fakeProcess); ok && !(p.ctr == "c1" && (p.id == "init" || p.id == "e1")) {
		go func() { m.exits <- p }()
	}
	return nil
}
func (m *fakeMonitor) MonitorOOM(monitor.OOMSource) error { return nil }
func (m *fakeMonitor) StopOOM(string)                     {}
func (m *fakeMonitor) Exits() <-chan monitor.ExitSource   { return m.exits }
func (m *fakeMonitor) OOMs() <-chan string                { return m.ooms }
func (m *fakeMonitor) Count() int                         { return 0 }
func (m *fakeMonitor) Close() error                       { return nil }

// fakeRecords: every start was published, no exit was.
type fakeRecords struct{}

func (fakeRecords) MarkStarted(string) error       { return nil }
func (fakeRecords) Started(string) bool            { return true }
func (fakeRecords) MarkExitPublished(string) error { return nil }
func (fakeRecords) ExitPublished(string) bool      { return false }
