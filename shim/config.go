package main

import (
	"encoding/json"
	"fmt"
	"os"
)

// processConfig is process.json, written by the daemon before it starts us.
type processConfig struct {
	Exec bool `json:"exec"`
	// Process is the OCI process object: passed to `runc exec` for an exec,
	// informative for the init (runc reads the bundle's config.json).
	Process json.RawMessage `json:"process"`
	// Stdin, Stdout and Stderr are the client's FIFO paths; "" is /dev/null.
	Stdin    string `json:"stdin"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	Terminal bool   `json:"terminal"`
	// Runtime is the runtime binary; the command line's <runtime> wins.
	Runtime     string   `json:"runtime"`
	RuntimeArgs []string `json:"runtimeArgs"`
	NoPivotRoot bool     `json:"noPivotRoot"`
	// Checkpoint, when set, restores from this image dir instead of creating.
	Checkpoint     string         `json:"checkpoint"`
	CheckpointOpts checkpointOpts `json:"checkpointOpts"`
	// RootUID and RootGID are the host ids container root maps to: the
	// stdio pipes are given to them so a user-namespaced process can use them.
	RootUID int `json:"rootUID"`
	RootGID int `json:"rootGID"`
}

// checkpointOpts are the restore options of a checkpoint.
type checkpointOpts struct {
	TCP         bool     `json:"tcp"`
	UnixSockets bool     `json:"unixSockets"`
	Shell       bool     `json:"shell"`
	EmptyNS     []string `json:"emptyNS"`
}

func readConfig(path string) (*processConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read process.json: %w", err)
	}
	var c processConfig
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("parse process.json: %w", err)
	}
	if c.Exec && len(c.Process) == 0 {
		return nil, fmt.Errorf("process.json: exec without a process")
	}
	return &c, nil
}
