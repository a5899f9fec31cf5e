package runtime

import (
	"path/filepath"
	"time"

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
	runcLogFile       = "log.json"

	initID = "init"
)

// containerRecord is state.json: everything Load needs to rebuild a Container
// without the daemon's memory or runc.
type containerRecord struct {
	ID           string        `json:"id"`
	Bundle       string        `json:"bundle"`
	Runtime      string        `json:"runtime"`
	RuntimeArgs  []string      `json:"runtimeArgs,omitempty"`
	Shim         string        `json:"shim"`
	Labels       []string      `json:"labels,omitempty"`
	NoPivotRoot  bool          `json:"noPivotRoot,omitempty"`
	Created      time.Time     `json:"created"`
	Incarnation  string        `json:"incarnation"`
	StartTimeout time.Duration `json:"startTimeout,omitempty"`
}

// processRecord is process.json, written by the daemon before the shim
// starts (layout in docs/shim-contract.md).
type processRecord struct {
	Exec           bool               `json:"exec"`
	Process        specs.ProcessSpec  `json:"process"`
	Stdin          string             `json:"stdin"`
	Stdout         string             `json:"stdout"`
	Stderr         string             `json:"stderr"`
	Terminal       bool               `json:"terminal"`
	Runtime        string             `json:"runtime"`
	RuntimeArgs    []string           `json:"runtimeArgs"`
	NoPivotRoot    bool               `json:"noPivotRoot"`
	Checkpoint     string             `json:"checkpoint"`
	CheckpointOpts shimCheckpointOpts `json:"checkpointOpts"`
	RootUID        uint32             `json:"rootUID"`
	RootGID        uint32             `json:"rootGID"`
}

// shimCheckpointOpts are the restore settings the shim passes to runc restore.
type shimCheckpointOpts struct {
	TCP         bool     `json:"tcp"`
	UnixSockets bool     `json:"unixSockets"`
	Shell       bool     `json:"shell"`
	EmptyNS     []string `json:"emptyNS"`
}

func (r *processRecord) stdio() Stdio {
	return Stdio{Stdin: r.Stdin, Stdout: r.Stdout, Stderr: r.Stderr}
}

// rootIDs returns the host uid and gid that container uid/gid 0 map to when
// the spec has a user namespace, else 0, 0.
func rootIDs(spec *specs.Spec) (uid, gid uint32) {
	if spec == nil || spec.Linux == nil {
		return 0, 0
	}
	for _, m := range spec.Linux.UIDMappings {
		if m.ContainerID == 0 {
			uid = m.HostID
		}
	}
	for _, m := range spec.Linux.GIDMappings {
		if m.ContainerID == 0 {
			gid = m.HostID
		}
	}
	return uid, gid
}

// retiredName is the name of a retired container's dir under Root/.retired.
func retiredName(id, incarnation string) string { return id + "." + incarnation }

func retiredDir(root string) string { return filepath.Join(root, ".retired") }

func asideDir(root string) string { return filepath.Join(root, ".aside") }
