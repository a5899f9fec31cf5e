package main

import (
	"errors"
	"os"
)

// processConfig is process.json, written by the daemon before it starts us.
type processConfig struct {
	Exec bool
	// Process is the raw OCI process object: passed to `runc exec` for an
	// exec, informative for the init (runc reads the bundle's config.json).
	Process []byte
	// Stdin, Stdout and Stderr are the client's FIFO paths; "" is /dev/null.
	Stdin, Stdout, Stderr string
	// LogPath, when set, is kubelet's CRI log file: stdout and stderr (then
	// both "") are written into it as records of the two streams (crilog).
	LogPath  string
	Terminal bool
	// Runtime is the runtime binary; the command line's <runtime> wins.
	Runtime     string
	RuntimeArgs []string
	NoPivotRoot bool
	// Start: after `runc create`, run `runc start` too (the init only),
	// recording the OOM counters first (recordOOMBaseline).
	Start bool
	// Ephemeral: an exec the daemon never reports after a restart (the
	// CRI's ExecSync); its files are written without fsync (writeState).
	Ephemeral bool
	// DirectOutput: the process writes into the Stdout and Stderr FIFOs
	// itself, with no pipe and copy of ours between (an ephemeral exec
	// whose reader, the daemon, bounds what it keeps); see directOut.
	DirectOutput bool
	// Checkpoint, when set, restores from this image dir instead of creating.
	Checkpoint     string
	CheckpointOpts checkpointOpts
	// RootUID and RootGID are the host ids container root maps to: the
	// stdio pipes are given to them so a user-namespaced process can use them.
	RootUID, RootGID int
	// Features are the runtime's flags as the daemon learnt them; without
	// "runtimeFeatures" today's runc is assumed.
	Features runtimeFeatures
}

// runtimeFeatures are the runtime flags whose presence changes our command
// lines: --console-socket (else --console <pty slave>), and the global
// --log/--log-format json.
type runtimeFeatures struct {
	ConsoleSocket, Log bool
}

// checkpointOpts are the restore options of a checkpoint.
type checkpointOpts struct {
	TCP, UnixSockets, Shell bool
	EmptyNS                 []string
}

func readConfig(path string) (*processConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, wrap("read process.json", err)
	}
	c, err := parseConfig(data)
	if err != nil {
		return nil, wrap("parse process.json", err)
	}
	return c, nil
}

// parseConfig reads process.json; unknown keys are ignored.
func parseConfig(data []byte) (*processConfig, error) {
	m, err := jsonObject(data)
	if err != nil {
		return nil, err
	}
	c := &processConfig{}
	d := fieldReader{m: m}
	c.Exec = d.bool("exec")
	c.Stdin, c.Stdout, c.Stderr = d.string("stdin"), d.string("stdout"), d.string("stderr")
	c.LogPath = d.string("logPath")
	c.Terminal = d.bool("terminal")
	c.Runtime, c.RuntimeArgs = d.string("runtime"), d.strings("runtimeArgs")
	c.NoPivotRoot = d.bool("noPivotRoot")
	c.Checkpoint = d.string("checkpoint")
	c.Start = d.bool("start")
	c.Ephemeral = d.bool("ephemeral")
	c.DirectOutput = d.bool("directOutput")
	c.RootUID, c.RootGID = d.int("rootUID"), d.int("rootGID")
	if !isNull(m["process"]) {
		c.Process = m["process"]
	}
	if d.err == nil && !isNull(m["checkpointOpts"]) {
		c.CheckpointOpts, d.err = parseCheckpointOpts(m["checkpointOpts"])
	}
	c.Features = runtimeFeatures{ConsoleSocket: true, Log: true}
	if d.err == nil && !isNull(m["runtimeFeatures"]) {
		c.Features, d.err = parseFeatures(m["runtimeFeatures"])
	}
	if d.err == nil && c.Exec && c.Process == nil {
		d.err = errors.New("exec without a process")
	}
	if d.err == nil && c.LogPath != "" && (c.Stdout != "" || c.Stderr != "") {
		d.err = errors.New(`"logPath" takes the place of "stdout" and "stderr", which must be empty`)
	}
	if d.err == nil && c.Ephemeral && !c.Exec {
		d.err = errors.New(`"ephemeral" is for an exec only`)
	}
	if d.err == nil && c.DirectOutput && (!c.Ephemeral || c.Terminal || c.LogPath != "") {
		d.err = errors.New(`"directOutput" is for an ephemeral exec without a terminal or a CRI log only`)
	}
	if d.err == nil && c.Start && (c.Exec || c.Checkpoint != "") {
		d.err = errors.New(`"start" is for a created init only, not an exec or a restore`)
	}
	return c, d.err
}

func parseCheckpointOpts(raw []byte) (checkpointOpts, error) {
	m, err := jsonObject(raw)
	if err != nil {
		return checkpointOpts{}, wrap("checkpointOpts", err)
	}
	d := fieldReader{m: m}
	o := checkpointOpts{TCP: d.bool("tcp"), UnixSockets: d.bool("unixSockets"), Shell: d.bool("shell"), EmptyNS: d.strings("emptyNS")}
	return o, d.err
}

func parseFeatures(raw []byte) (runtimeFeatures, error) {
	m, err := jsonObject(raw)
	if err != nil {
		return runtimeFeatures{}, wrap("runtimeFeatures", err)
	}
	d := fieldReader{m: m}
	f := runtimeFeatures{ConsoleSocket: d.bool("consoleSocket"), Log: d.bool("log")}
	return f, d.err
}

// fieldReader reads typed members of a JSON object, keeping the first error.
type fieldReader struct {
	m   map[string][]byte
	err error
}

func (d *fieldReader) note(key string, err error) {
	if err != nil && d.err == nil {
		d.err = wrap(`field "`+key+`"`, err)
	}
}

func (d *fieldReader) string(key string) string {
	v, err := jsonString(d.m[key])
	d.note(key, err)
	return v
}

func (d *fieldReader) bool(key string) bool {
	v, err := jsonBool(d.m[key])
	d.note(key, err)
	return v
}

func (d *fieldReader) int(key string) int {
	v, err := jsonInt(d.m[key])
	d.note(key, err)
	return v
}

func (d *fieldReader) strings(key string) []string {
	v, err := jsonStrings(d.m[key])
	d.note(key, err)
	return v
}
