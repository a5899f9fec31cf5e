package main

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evjournal/containerd/api/types"
	"github.com/urfave/cli/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestMissingArguments(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"containers", "kill"}, "[ctr] container id cannot be empty\n"},
		{[]string{"containers", "pause"}, "[ctr] container id cannot be empty\n"},
		{[]string{"containers", "stats"}, "[ctr] container id cannot be empty\n"},
		{[]string{"containers", "start"}, "[ctr] container id cannot be empty\n"},
		{[]string{"containers", "start", "c1"}, "[ctr] bundle path cannot be empty\n"},
		{[]string{"containers", "exec", "sh"}, "[ctr] container id cannot be empty\n"},
		{[]string{"containers", "exec", "--id", "c1", "sh"}, "[ctr] process id cannot be empty\n"},
		{[]string{"containers", "exec", "--id", "c1", "--pid", "p"}, "[ctr] process args cannot be empty\n"},
		{[]string{"checkpoints", "create", "c1"}, "[ctr] checkpoint name cannot be empty\n"},
		{[]string{"checkpoints", "delete"}, "[ctr] container id cannot be empty\n"},
		{[]string{"checkpoints"}, "[ctr] container id cannot be empty\n"},
		{[]string{"containers", "start", "--runtime-args", "--root=/x", "c1", "b"},
			"[ctr] --runtime-args needs --runtime (without it the daemon's own runtime arguments apply)\n"},
		{[]string{"containers", "kill", "-s", "NOPE", "c1"}, "[ctr] invalid signal \"NOPE\"\n"},
		{[]string{"events", "--since", "yesterday"}, "[ctr] --since \"yesterday\": want a duration (10m) or an RFC 3339 time\n"},
		{[]string{"containers", "update", "--memory-limit", "lots", "c1"}, "[ctr] --memory-limit \"lots\": not a number\n"},
		{[]string{"nope"}, "ctr: unknown command \"nope\"\n"},
		{[]string{"--bogus"}, "ctr: flag provided but not defined: -bogus\n"},
		{[]string{"containers", "list", "--bogus"}, "ctr: flag provided but not defined: -bogus\n"},
		{[]string{"--address", "/no/proto", "version"}, "ctr: --address \"/no/proto\": want proto://address, e.g. unix:///run/containerd/containerd.sock\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, out, errOut := runCtr(t, "", tt.args...)
			if code != 1 || errOut != tt.want || out != "" {
				t.Fatalf("code %d, stdout %q, stderr %q; want 1 and %q", code, out, errOut, tt.want)
			}
		})
	}
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		err  error
		code int
		msg  string
	}{
		{nil, 0, ""},
		{&exitStatus{code: 3}, 3, ""},
		{&exitStatus{code: 0}, 0, ""},
		{missing("x"), 1, "[ctr] x\n"},
		{status.Error(codes.NotFound, "containerd: container not found"), 1,
			"ctr: rpc error: code = NotFound desc = containerd: container not found\n"},
		{cli.Exit("bad", 3), 1, "ctr: bad\n"},
	}
	for _, tt := range tests {
		var b strings.Builder
		if got := exitCode(tt.err, &b); got != tt.code || b.String() != tt.msg {
			t.Errorf("exitCode(%v) = %d, %q; want %d, %q", tt.err, got, b.String(), tt.code, tt.msg)
		}
	}
}

func TestEventsRequestFlags(t *testing.T) {
	now := time.Date(2024, 3, 4, 5, 6, 7, 8, time.UTC)
	tests := []struct {
		name       string
		timestamp  string
		since      string
		afterSeq   uint64
		storedOnly bool
		want       *types.EventsRequest // Timestamp compared as time; nil = none
		wantTime   time.Time
		wantErr    bool
	}{
		{name: "live only", want: &types.EventsRequest{}},
		{name: "timestamp", timestamp: "2024-01-02T03:04:05.123456789Z", want: &types.EventsRequest{},
			wantTime: time.Date(2024, 1, 2, 3, 4, 5, 123456789, time.UTC)},
		{name: "timestamp with offset", timestamp: "2024-01-02T03:04:05+02:00", want: &types.EventsRequest{},
			wantTime: time.Date(2024, 1, 2, 1, 4, 5, 0, time.UTC)},
		{name: "bad timestamp", timestamp: "2024-01-02", wantErr: true},
		{name: "since duration", since: "10m", want: &types.EventsRequest{}, wantTime: now.Add(-10 * time.Minute)},
		{name: "since compound duration", since: "1h30m", want: &types.EventsRequest{}, wantTime: now.Add(-90 * time.Minute)},
		{name: "since RFC 3339", since: "2024-01-02T03:04:05Z", want: &types.EventsRequest{},
			wantTime: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)},
		{name: "since negative", since: "-5m", wantErr: true},
		{name: "since garbage", since: "yesterday", wantErr: true},
		{name: "both", timestamp: "2024-01-02T03:04:05Z", since: "5m", wantErr: true},
		{name: "stored only: everything", storedOnly: true, want: &types.EventsRequest{StoredOnly: true}, wantTime: time.Unix(0, 0)},
		{name: "stored only since", storedOnly: true, since: "1m", want: &types.EventsRequest{StoredOnly: true}, wantTime: now.Add(-time.Minute)},
		{name: "after seq", afterSeq: 42, want: &types.EventsRequest{AfterSeq: 42}},
		{name: "stored only after seq", afterSeq: 42, storedOnly: true, want: &types.EventsRequest{AfterSeq: 42, StoredOnly: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := eventsRequest(tt.timestamp, tt.since, tt.afterSeq, tt.storedOnly, now)
			if tt.wantErr {
				var ue *usageError
				if !errors.As(err, &ue) {
					t.Fatalf("error %v, want a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.GetStoredOnly() != tt.want.GetStoredOnly() || got.GetAfterSeq() != tt.want.GetAfterSeq() {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			switch {
			case tt.wantTime.IsZero() && got.GetTimestamp() != nil:
				t.Fatalf("timestamp %v, want none", got.GetTimestamp())
			case !tt.wantTime.IsZero() && !got.GetTimestamp().AsTime().Equal(tt.wantTime):
				t.Fatalf("timestamp %v, want %v", got.GetTimestamp().AsTime(), tt.wantTime)
			}
		})
	}
}

func TestParseLimit(t *testing.T) {
	tests := []struct {
		in      string
		want    uint64
		wantErr bool
	}{
		{"0", 0, false},
		{"1048576", 1 << 20, false},
		{"0x100000", 1 << 20, false},
		{"0X10", 16, false},
		{"0o17", 15, false},
		{"017", 15, false}, // leading 0: octal, as strconv base 0 (and v0.2.9)
		{"0b101", 5, false},
		{"1_000", 1000, false},
		{"18446744073709551615", math.MaxUint64, false},
		{"-1", math.MaxUint64, false},
		{"-2", 0, true},
		{"1k", 0, true},
		{"", 0, true},
		{"18446744073709551616", 0, true},
	}
	for _, tt := range tests {
		got, err := parseLimit(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseLimit(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestUpdateResources(t *testing.T) {
	flags := map[string]string{
		"memory-limit": "0x1000", "memory-swap": "-1", "cpu-shares": "512", "cpu-quota": "50000",
		"cpu-period": "100000", "kernel-limit": "1", "kernel-tcp-limit": "2", "blkio-weight": "300",
		"pids-limit": "64", "memory-reservation": "010", "cpuset-cpus": "0-1", "cpuset-mems": "0",
	}
	r, err := updateResources(func(name string) string { return flags[name] })
	if err != nil {
		t.Fatal(err)
	}
	want := &types.UpdateResource{
		MemoryLimit: 0x1000, MemorySwap: math.MaxUint64, CpuShares: 512, CpuQuota: 50000, CpuPeriod: 100000,
		KernelMemoryLimit: 1, KernelTCPMemoryLimit: 2, BlkioWeight: 300, PidsLimit: 64, MemoryReservation: 8,
		CpusetCpus: "0-1", CpusetMems: "0",
	}
	if r.String() != want.String() {
		t.Fatalf("got  %v\nwant %v", r, want)
	}
	empty, err := updateResources(func(string) string { return "" })
	if err != nil || empty.String() != (&types.UpdateResource{}).String() {
		t.Fatalf("no flags: %v, %v", empty, err)
	}
}

func TestParseSignal(t *testing.T) {
	tests := []struct {
		in      string
		want    uint32
		wantErr bool
	}{
		{"15", 15, false}, {"9", 9, false}, {"0", 0, false}, {"KILL", 9, false}, {"sigterm", 15, false},
		{"SIGUSR1", 10, false}, {"65", 0, true}, {"SIGNOPE", 0, true}, {"-1", 0, true},
	}
	for _, tt := range tests {
		got, err := parseSignal(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseSignal(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestExitWaiterHandle(t *testing.T) {
	ev := func(typ, id, pid string, st uint32) *types.Event {
		return &types.Event{Type: typ, Id: id, Pid: pid, Status: st}
	}
	tests := []struct {
		name   string
		target target
		events []*types.Event
		code   int
		done   bool
	}{
		{"init exit after start", target{id: "c", pid: "init", started: "start-container"},
			[]*types.Event{ev("start-container", "c", "", 0), ev("exit", "c", "init", 3)}, 3, true},
		{"an earlier incarnation's exit is skipped", target{id: "c", pid: "init", started: "start-container"},
			[]*types.Event{ev("exit", "c", "init", 1), ev("start-container", "c", "", 0)}, 0, false},
		{"other containers are skipped", target{id: "c", pid: "init", started: "start-container"},
			[]*types.Event{ev("start-container", "d", "", 0), ev("exit", "d", "init", 1)}, 0, false},
		{"exec exit after its start", target{id: "c", pid: "e", started: "start-process"},
			[]*types.Event{ev("start-process", "c", "e", 0), ev("exit", "c", "other", 2), ev("exit", "c", "e", 137)}, 137, true},
		{"another exec's start does not arm", target{id: "c", pid: "e", started: "start-process"},
			[]*types.Event{ev("start-process", "c", "f", 0), ev("exit", "c", "e", 1)}, 0, false},
		{"status above 255", target{id: "c", pid: "init", started: "start-container"},
			[]*types.Event{ev("start-container", "c", "", 0), ev("exit", "c", "init", 300)}, 255, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &exitWaiter{t: tt.target}
			code, done := 0, false
			for _, e := range tt.events {
				if code, done = w.handle(e); done {
					break
				}
			}
			if code != tt.code || done != tt.done {
				t.Fatalf("got %d, %v; want %d, %v", code, done, tt.code, tt.done)
			}
		})
	}
}

func TestIsTransportClosing(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{status.Error(codes.Internal, "transport is closing"), true}, // grpc-go 1.0.4's wording
		{status.Error(codes.Unavailable, "error reading from server: EOF"), true},
		{status.Error(codes.Unavailable, "containerd: subscriber too slow, events dropped: resume after seq 4 (timestamp x)"), false},
		{status.Error(codes.Unknown, "boom"), false},
		{errors.New("plain"), false},
	}
	for _, tt := range tests {
		if got := isTransportClosing(tt.err); got != tt.want {
			t.Errorf("isTransportClosing(%v) = %v", tt.err, got)
		}
	}
}

func TestBundleTerminal(t *testing.T) {
	dir := t.TempDir()
	if tty, err := bundleTerminal(dir); err != nil || tty {
		t.Fatalf("missing config.json: %v, %v", tty, err)
	}
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"process":{"terminal":true}}`), 0o600)
	if tty, err := bundleTerminal(dir); err != nil || !tty {
		t.Fatalf("terminal bundle: %v, %v", tty, err)
	}
}
