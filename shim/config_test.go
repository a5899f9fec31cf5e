package main

import (
	"slices"
	"strings"
	"testing"
)

func TestParseConfig(t *testing.T) {
	doc := `{
	  "exec": true,
	  "process": {"args": ["/bin/sh", "-c", "echo \"hi\""], "cwd": "/", "terminal": true},
	  "stdin": "/run/x/stdin", "stdout": "/run/x/stdout", "stderr": "",
	  "terminal": true,
	  "runtime": "/usr/bin/runc",
	  "runtimeArgs": ["--root", "/run/r", "--systemd-cgroup"],
	  "noPivotRoot": true,
	  "checkpoint": "/cp",
	  "checkpointOpts": {"tcp": true, "unixSockets": false, "shell": true, "emptyNS": ["network"]},
	  "rootUID": 100000, "rootGID": 100001,
	  "runtimeFeatures": {"consoleSocket": false, "log": true, "pidFile": true},
	  "unknown": {"ignored": [1, 2, 3]}
	}`
	c, err := parseConfig([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := processConfig{
		Exec: true, Stdin: "/run/x/stdin", Stdout: "/run/x/stdout", Terminal: true,
		Runtime: "/usr/bin/runc", RuntimeArgs: []string{"--root", "/run/r", "--systemd-cgroup"},
		NoPivotRoot: true, Checkpoint: "/cp",
		CheckpointOpts: checkpointOpts{TCP: true, Shell: true, EmptyNS: []string{"network"}},
		RootUID:        100000, RootGID: 100001,
		Features: runtimeFeatures{Log: true},
	}
	if string(c.Process) != `{"args": ["/bin/sh", "-c", "echo \"hi\""], "cwd": "/", "terminal": true}` {
		t.Errorf("process %s", c.Process)
	}
	c.Process = nil
	if !equalConfig(c, &want) {
		t.Errorf("got  %+v\nwant %+v", *c, want)
	}
}

func equalConfig(a, b *processConfig) bool {
	return a.Exec == b.Exec && a.Stdin == b.Stdin && a.Stdout == b.Stdout && a.Stderr == b.Stderr && a.LogPath == b.LogPath &&
		a.Terminal == b.Terminal && a.Runtime == b.Runtime && slices.Equal(a.RuntimeArgs, b.RuntimeArgs) &&
		a.NoPivotRoot == b.NoPivotRoot && a.Checkpoint == b.Checkpoint &&
		a.CheckpointOpts.TCP == b.CheckpointOpts.TCP && a.CheckpointOpts.UnixSockets == b.CheckpointOpts.UnixSockets &&
		a.CheckpointOpts.Shell == b.CheckpointOpts.Shell && slices.Equal(a.CheckpointOpts.EmptyNS, b.CheckpointOpts.EmptyNS) &&
		a.RootUID == b.RootUID && a.RootGID == b.RootGID && string(a.Process) == string(b.Process) &&
		a.Features == b.Features
}

func TestParseConfigLogPath(t *testing.T) {
	c, err := parseConfig([]byte(`{"stdin": "/run/x/stdin", "logPath": "/var/log/pods/p/c/0.log"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := processConfig{Stdin: "/run/x/stdin", LogPath: "/var/log/pods/p/c/0.log", Features: runtimeFeatures{ConsoleSocket: true, Log: true}}
	if !equalConfig(c, &want) {
		t.Errorf("got  %+v\nwant %+v", *c, want)
	}
}

func TestParseConfigDefaults(t *testing.T) {
	c, err := parseConfig([]byte(`{"process": null, "runtimeArgs": null}`))
	if err != nil {
		t.Fatal(err)
	}
	// Without runtimeFeatures, today's runc.
	if !equalConfig(c, &processConfig{Features: runtimeFeatures{ConsoleSocket: true, Log: true}}) {
		t.Errorf("got %+v, want zero values", *c)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"exec": true}`, "exec without a process"},
		{`{"exec": "yes"}`, `field "exec"`},
		{`{"runtimeArgs": "--root"}`, `field "runtimeArgs"`},
		{`{"rootUID": "0"}`, `field "rootUID"`},
		{`{"checkpointOpts": {"emptyNS": "network"}}`, `field "emptyNS"`},
		{`{"stdin": "x"`, "malformed JSON"},
		{`{"runtimeFeatures": {"log": 1}}`, `field "log"`},
		{`{"logPath": 7}`, `field "logPath"`},
		{`{"logPath": "/l/0.log", "stdout": "/o"}`, `"logPath" takes the place of "stdout" and "stderr"`},
		{`{"logPath": "/l/0.log", "stderr": "/e"}`, `"logPath" takes the place of "stdout" and "stderr"`},
		{`{"exec": true, "process": {}, "directOutput": true}`, `"directOutput" is for an ephemeral exec`},
		{`{"exec": true, "process": {}, "ephemeral": true, "terminal": true, "directOutput": true}`, `"directOutput" is for an ephemeral exec`},
		{`{"exec": true, "process": {}, "ephemeral": true, "directOutput": "yes"}`, `field "directOutput"`},
	} {
		_, err := parseConfig([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseConfig(%s): error %v, want one mentioning %q", tc.doc, err, tc.want)
		}
	}
}
