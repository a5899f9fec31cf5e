package supervisor

import (
	"fmt"
	"time"

	"github.com/containerd/errdefs"

	"github.com/evjournal/containerd/specs"
)

// entry is the loop's record of one container incarnation. Owned by the loop.
type entry struct {
	id       string
	c        Container // nil while the container is being created
	status   string    // creating, running, paused, stopped
	init     Process
	execs    map[string]Process
	reserved map[string]int // exec ids whose creation is in progress, with their stateWeight
	// ephemeral are the execs whose start and exit are not journaled
	// (ExecRequest.Ephemeral).
	ephemeral map[string]bool
	exiting   map[Process]bool
	// initExit holds the init's exit once known, while execs are still
	// running: their exits are published first.
	initExit      *exitNote
	initPublished bool // the init's exit was published (finishInit ran)
	pendingOOM    bool // an OOM seen while the container was being created
	removed       bool
}

// exitNote is a process's exit as the shim reported it.
type exitNote struct {
	status uint32
	at     time.Time // the shim's reap time; zero when unknown
}

const statusCreating = "creating"

func newEntry(id string) *entry {
	return &entry{id: id, status: statusCreating, execs: map[string]Process{},
		reserved: map[string]int{}, exiting: map[Process]bool{}, ephemeral: map[string]bool{}}
}

// process finds a process of the entry by its client-side id.
func (e *entry) process(pid string) (Process, bool) {
	if pid == "init" && e.init != nil {
		return e.init, true
	}
	p, ok := e.execs[pid]
	return p, ok
}

// running reports whether the container accepts execs and signals.
// execsDone: no exec of the container runs, and none is starting.
func (e *entry) execsDone() bool { return len(e.execs) == 0 && len(e.reserved) == 0 }

func (e *entry) running() bool {
	return (e.status == StatusRunning || e.status == StatusPaused) && e.initExit == nil
}

// info is the snapshot State and CreateContainer return.
func (e *entry) info() ContainerInfo {
	status := e.status
	if status == statusCreating || e.initExit != nil {
		status = StatusStopped
	}
	ci := ContainerInfo{ID: e.id, Status: status}
	if e.c == nil {
		return ci
	}
	ci.Bundle, ci.Labels, ci.Runtime, ci.Incarnation = e.c.Bundle(), e.c.Labels(), e.c.Runtime(), e.c.Incarnation()
	if e.init != nil {
		ci.Processes = append(ci.Processes, processInfo(e.init))
	}
	for _, p := range e.execs {
		ci.Processes = append(ci.Processes, processInfo(p))
	}
	return ci
}

func processInfo(p Process) ProcessInfo {
	return ProcessInfo{ID: p.ID(), SystemPid: p.SystemPid(), Spec: p.Spec(), Stdio: p.Stdio()}
}

// Bounds on what one container's execs add to a State reply, which lists
// every process with its args and env and must stay under the 4 MiB a
// client accepts (docs/api.md 7.1).
const (
	maxExecsPerContainer = 1024
	maxExecBytes         = 1 << 20
)

// stateWeight is about what a process adds to a State reply: its args and
// env, and a fixed part for the rest (ids, cwd, stdio paths, framing).
func stateWeight(spec specs.ProcessSpec) int {
	n := 256 + len(spec.Cwd)
	for _, l := range [][]string{spec.Args, spec.Env} {
		for _, v := range l {
			n += len(v) + 8
		}
	}
	return n
}

// execRoom says whether an exec of weight w fits in the container's bounds.
func (e *entry) execRoom(w int) error {
	count, total := len(e.reserved), w
	for _, x := range e.execs {
		count++
		total += stateWeight(x.Spec())
	}
	for _, r := range e.reserved {
		total += r
	}
	if count >= maxExecsPerContainer {
		return fmt.Errorf("container %q runs %d execs, the most one container may (they are all listed in State): %w",
			e.id, count, errdefs.ErrResourceExhausted)
	}
	if total > maxExecBytes {
		return fmt.Errorf("container %q: its execs' args and env would add %d bytes to a State reply, more than the %d one container may: %w",
			e.id, total, maxExecBytes, errdefs.ErrResourceExhausted)
	}
	return nil
}
