package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRuncArgv: the command lines of docs/shim-contract.md, flag by flag.
func TestRuncArgv(t *testing.T) {
	a := args{id: "c1", bundle: "/b"}
	at := time.Date(2024, 5, 6, 7, 8, 9, 10, time.UTC)
	global := []string{"runc", "--log", "/s/c1/init/log.json", "--log-format", "json", "--root", "/r"}
	for _, tc := range []struct {
		name    string
		cfg     processConfig
		console string
		old     bool // a runc with --console, not --console-socket
		noLog   bool // a runtime without --log-format
		want    []string
	}{
		{
			name: "create",
			cfg:  processConfig{},
			want: []string{"create", "--bundle", "/b", "--pid-file", "/s/c1/init/pid", "c1"},
		},
		{
			name:    "create with a terminal and no pivot",
			cfg:     processConfig{NoPivotRoot: true},
			console: "/tmp/pty1/pty.sock",
			want:    []string{"create", "--bundle", "/b", "--console-socket", "/tmp/pty1/pty.sock", "--no-pivot", "--pid-file", "/s/c1/init/pid", "c1"},
		},
		{
			name:    "create with a terminal on runc 1.0.0-rc2",
			cfg:     processConfig{},
			console: "/dev/pts/7",
			old:     true,
			want:    []string{"create", "--bundle", "/b", "--console", "/dev/pts/7", "--pid-file", "/s/c1/init/pid", "c1"},
		},
		{
			name:    "exec with a terminal on runc 1.0.0-rc2",
			cfg:     processConfig{Exec: true},
			console: "/dev/pts/8",
			old:     true,
			want:    []string{"exec", "-d", "--process", "/s/c1/init/runc-process.json", "--console", "/dev/pts/8", "--pid-file", "/s/c1/init/pid", "c1"},
		},
		{
			name: "exec",
			cfg:  processConfig{Exec: true, NoPivotRoot: true},
			want: []string{"exec", "-d", "--process", "/s/c1/init/runc-process.json", "--pid-file", "/s/c1/init/pid", "c1"},
		},
		{
			name:    "exec with a terminal",
			cfg:     processConfig{Exec: true},
			console: "/tmp/pty2/pty.sock",
			want:    []string{"exec", "-d", "--process", "/s/c1/init/runc-process.json", "--console-socket", "/tmp/pty2/pty.sock", "--pid-file", "/s/c1/init/pid", "c1"},
		},
		{
			name: "restore",
			cfg:  processConfig{Checkpoint: "/cp"},
			want: []string{"restore", "-d", "--image-path", "/cp", "--work-path", "/cp/criu.work/restore-2024-05-06T07:08:09.000000010Z", "--bundle", "/b", "--pid-file", "/s/c1/init/pid", "c1"},
		},
		{
			name:    "restore with a terminal",
			cfg:     processConfig{Checkpoint: "/cp"},
			console: "/tmp/pty3/pty.sock",
			want: []string{"restore", "-d", "--image-path", "/cp", "--work-path", "/cp/criu.work/restore-2024-05-06T07:08:09.000000010Z",
				"--console-socket", "/tmp/pty3/pty.sock", "--bundle", "/b", "--pid-file", "/s/c1/init/pid", "c1"},
		},
		{
			name: "restore with every option",
			cfg: processConfig{Checkpoint: "/cp", NoPivotRoot: true, CheckpointOpts: checkpointOpts{
				TCP: true, UnixSockets: true, Shell: true, EmptyNS: []string{"network", "ipc"}}},
			want: []string{"restore", "-d", "--image-path", "/cp", "--work-path", "/cp/criu.work/restore-2024-05-06T07:08:09.000000010Z",
				"--tcp-established", "--ext-unix-sk", "--shell-job", "--no-pivot", "--empty-ns", "network", "--empty-ns", "ipc",
				"--bundle", "/b", "--pid-file", "/s/c1/init/pid", "c1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Runtime, cfg.RuntimeArgs = "runc", []string{"--root", "/r"}
			cfg.Features = runtimeFeatures{ConsoleSocket: !tc.old, Log: true}
			console := consoleArg{}
			if tc.console != "" {
				console = consoleArg{flag: "--console-socket", path: tc.console}
				if tc.old {
					console.flag = "--console"
				}
			}
			got := runcArgv(&cfg, a, "/s/c1/init", console, at)
			want := append(slices.Clone(global), tc.want...)
			if !slices.Equal(got, want) {
				t.Errorf("got  %q\nwant %q", got, want)
			}
		})
	}
}

// TestRuncArgvWithoutLog: a runtime without --log-format gets no --log.
func TestRuncArgvWithoutLog(t *testing.T) {
	cfg := processConfig{Runtime: "crun-ish", RuntimeArgs: []string{"--root", "/r"}}
	got := runcArgv(&cfg, args{id: "c1", bundle: "/b"}, "/s/c1/init", consoleArg{}, time.Now())
	want := []string{"crun-ish", "--root", "/r", "create", "--bundle", "/b", "--pid-file", "/s/c1/init/pid", "c1"}
	if !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// TestRuntimeEnv: runc runs with one P, whatever the shim's GOMAXPROCS,
// and with everything else of the shim's environment.
func TestRuntimeEnv(t *testing.T) {
	for _, shimValue := range []string{"", "1", "8"} {
		t.Setenv("GOMAXPROCS", shimValue)
		t.Setenv("SHIM_TEST_KEEP", "yes")
		env := runtimeEnv()
		var procs []string
		for _, kv := range env {
			if strings.HasPrefix(kv, "GOMAXPROCS=") {
				procs = append(procs, kv)
			}
		}
		if len(procs) != 1 || procs[0] != "GOMAXPROCS=1" {
			t.Errorf("shim GOMAXPROCS=%q: runc's GOMAXPROCS entries %q, want only GOMAXPROCS=1", shimValue, procs)
		}
		if !slices.Contains(env, "SHIM_TEST_KEEP=yes") {
			t.Errorf("runc's environment lost the shim's other variables: %q", env)
		}
	}
}
