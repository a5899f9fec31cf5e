package main

import (
	"slices"
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
			got := runcArgv(&cfg, a, "/s/c1/init", tc.console, at)
			want := append(slices.Clone(global), tc.want...)
			if !slices.Equal(got, want) {
				t.Errorf("got  %q\nwant %q", got, want)
			}
		})
	}
}
