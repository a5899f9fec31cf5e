package supervisor

import (
	"time"

	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/specs"
)

// CreateRequest asks for a new container (CreateContainer in the v0.2 API).
type CreateRequest struct {
	ID          string
	Bundle      string
	Stdio       runtime.Stdio
	Labels      []string
	NoPivotRoot bool
	// Runtime and RuntimeArgs override the daemon's defaults when Runtime is
	// not empty (v0.2 rule: then RuntimeArgs replace the daemon's args, even
	// when empty).
	Runtime     string
	RuntimeArgs []string
	// Checkpoint, when not empty, restores from CheckpointDir/Checkpoint
	// (CheckpointDir "" = <bundle>/checkpoints).
	Checkpoint    string
	CheckpointDir string
}

// ExecRequest asks for a new process in a running container (AddProcess).
type ExecRequest struct {
	ID    string // container
	Pid   string // process id chosen by the client
	Spec  specs.ProcessSpec
	Stdio runtime.Stdio
	// Ephemeral: the process leaves nothing to restore and nobody to tell
	// but its caller (the CRI's ExecSync, a probe): neither its start nor
	// its exit is journaled or published, only handed to WatchExit, so it
	// runs while the journal cannot write. After a daemon crash it is
	// killed at the restore, like any exec whose start was not journaled.
	Ephemeral bool
	// DirectOutput (with Ephemeral, FIFOs as Stdout and Stderr that the
	// caller holds open and drains): the process writes into them itself,
	// its shim copies nothing (runtime.ExecOpts.DirectOutput).
	DirectOutput bool
	// InheritInit: the process runs the init's process spec (environment,
	// user, cwd, capabilities, rlimits...) with Spec's Args and Terminal, as
	// the CRI's exec does; the loop reads it, so the caller needs no State.
	InheritInit bool
}

// UpdateRequest pauses, resumes or changes the resources of a container.
type UpdateRequest struct {
	ID        string
	Status    string // "paused", "running" or "" (then Resources applies)
	Resources *specs.LinuxResources
}

// ProcessUpdate resizes a process's pty and/or closes its stdin.
type ProcessUpdate struct {
	ID, Pid       string
	CloseStdin    bool
	Width, Height uint32
}

// SubscribeRequest selects the events of a subscription.
type SubscribeRequest struct {
	// After replays stored events strictly after this time; zero = no replay.
	After time.Time
	// AfterSeq, when not zero, replays events with a larger sequence number
	// instead (extension for new clients); it wins over After.
	AfterSeq uint64
	// JournalID, when set with AfterSeq, is the journal that numbered it
	// (Event's journal id): a cursor from another journal is refused.
	JournalID string
	// ID filters on one container; "" = all.
	ID string
	// StoredOnly ends the subscription after the replay.
	StoredOnly bool
	// Retained replays after After every event the journal still holds,
	// not only the last --retain-count: the CRI's backlog, bounded by age
	// instead (a 0.2 client is served at most --retain-count, as in v0.2).
	Retained bool
}

// ContainerInfo is a snapshot of one container for State and CreateContainer.
type ContainerInfo struct {
	ID          string
	Bundle      string
	Status      string // "running", "paused" or "stopped"
	Labels      []string
	Runtime     string
	Processes   []ProcessInfo
	Pids        []int // all pids of the container (State only, while running)
	Incarnation string
}

// ProcessInfo is a snapshot of one process of a container.
type ProcessInfo struct {
	ID        string // "init" or the exec id
	SystemPid int
	Spec      specs.ProcessSpec
	Stdio     runtime.Stdio
}

// Container statuses reported by State.
const (
	StatusRunning = "running"
	StatusPaused  = "paused"
	StatusStopped = "stopped"
)
