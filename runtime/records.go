package runtime

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/evjournal/containerd/bundle"
	"github.com/evjournal/containerd/specs"
)

// Names of the files in a container dir and a process dir. The process files
// are shared with the shim; docs/shim-contract.md is their specification.
const (
	stateFile         = "state.json"
	processFile       = "process.json"
	exitFifo          = "exit"
	controlFifo       = "control"
	pidFile           = "pid"
	startTimeFile     = "starttime"
	shimPidFile       = "shim.pid"
	shimStartTimeFile = "shim.starttime"
	exitStatusFile    = "exitStatus"
	exitPublishedFile = "exit-published"
	logReopenFile     = "log-reopen"
	runcLogFile       = "log.json"

	initID = "init"
)

// containerRecord is state.json: everything Load needs to rebuild a Container
// without the daemon's memory or runc.
type containerRecord struct {
	ID     string `json:"id"`
	Bundle string `json:"bundle"`
	// Spec is what the daemon needs of the bundle's config.json, read at
	// create: a restart never reads the client's bundle again.
	Spec         *bundle.Config `json:"spec,omitempty"`
	Runtime      string         `json:"runtime"`
	RuntimeArgs  []string       `json:"runtimeArgs,omitempty"`
	Shim         string         `json:"shim"`
	Labels       []string       `json:"labels,omitempty"`
	NoPivotRoot  bool           `json:"noPivotRoot,omitempty"`
	Created      time.Time      `json:"created"`
	Incarnation  string         `json:"incarnation"`
	StartTimeout time.Duration  `json:"startTimeout,omitempty"`
	// Translated: the runtime cannot read the bundle's dialect and runs
	// the daemon's translation of it, in <container dir>/.bundle
	// (translate.go); Spec.Dialect is then the translation's.
	Translated bool `json:"translated,omitempty"`
}

// processRecord is process.json, written by the daemon before the shim
// starts (layout in docs/shim-contract.md).
type processRecord struct {
	Exec bool `json:"exec"`
	// Process is written in dialect, the shape of the spec the runtime
	// runs (the shim hands it to `runc exec --process` as it is), and read
	// back in either shape; see MarshalJSON.
	Process specs.ProcessSpec `json:"-"`
	dialect bundle.Dialect
	Stdin   string `json:"stdin"`
	Stdout  string `json:"stdout"`
	Stderr  string `json:"stderr"`
	// LogPath is the CRI log the shim writes stdout and stderr into (then
	// both ""); Stdio.LogPath.
	LogPath     string   `json:"logPath,omitempty"`
	Terminal    bool     `json:"terminal"`
	Runtime     string   `json:"runtime"`
	RuntimeArgs []string `json:"runtimeArgs"`
	NoPivotRoot bool     `json:"noPivotRoot"`
	Checkpoint  string   `json:"checkpoint"`
	// Start asks the shim to run `runc start` itself right after `runc
	// create` (a fresh init only): the start report then comes from a
	// running init (CreateOpts.Start).
	Start bool `json:"start,omitempty"`
	// Ephemeral: an exec nobody is told of after a daemon restart
	// (ExecOpts.Ephemeral); the shim writes its files without fsync.
	Ephemeral bool `json:"ephemeral,omitempty"`
	// DirectOutput: the process writes into Stdout and Stderr itself
	// (ExecOpts.DirectOutput).
	DirectOutput   bool               `json:"directOutput,omitempty"`
	CheckpointOpts shimCheckpointOpts `json:"checkpointOpts"`
	RootUID        uint32             `json:"rootUID"`
	RootGID        uint32             `json:"rootGID"`
	// Features are the runtime's flags, so the shim builds command lines
	// the runtime accepts.
	Features Features `json:"runtimeFeatures"`
}

// MarshalJSON writes the process object in the record's dialect.
func (r processRecord) MarshalJSON() ([]byte, error) {
	raw, err := r.dialect.EncodeProcess(r.Process)
	if err != nil {
		return nil, err
	}
	type plain processRecord // no methods: no recursion
	return json.Marshal(struct {
		plain
		Process json.RawMessage `json:"process"`
	}{plain(r), raw})
}

// UnmarshalJSON reads the process object in either dialect and remembers
// which, so a record written back keeps it.
func (r *processRecord) UnmarshalJSON(data []byte) error {
	type plain processRecord
	var v struct {
		plain
		Process json.RawMessage `json:"process"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*r = processRecord(v.plain)
	if len(v.Process) == 0 {
		return nil
	}
	p, capList, err := bundle.DecodeProcess(v.Process)
	if err != nil {
		return err
	}
	r.Process = p
	r.dialect = bundle.Dialect{CapabilityList: capList != nil && *capList}
	return nil
}

// shimCheckpointOpts are the restore settings the shim passes to runc restore.
type shimCheckpointOpts struct {
	TCP         bool     `json:"tcp"`
	UnixSockets bool     `json:"unixSockets"`
	Shell       bool     `json:"shell"`
	EmptyNS     []string `json:"emptyNS"`
}

func (r *processRecord) stdio() Stdio {
	return Stdio{Stdin: r.Stdin, Stdout: r.Stdout, Stderr: r.Stderr, LogPath: r.LogPath}
}

// retiredName is the name of a retired container's dir under Root/.retired.
func retiredName(id, incarnation string) string { return id + "." + incarnation }

func retiredDir(root string) string { return filepath.Join(root, ".retired") }

func asideDir(root string) string { return filepath.Join(root, ".aside") }

// PrepareRoot makes what Root needs before any container: the dir retired
// containers are renamed into. Made at the daemon's start, so retiring a
// container (which frees its id and must precede its exit event) is a
// rename only, even on a full file system.
func PrepareRoot(root string) error {
	if err := os.MkdirAll(retiredDir(root), 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	return nil
}
