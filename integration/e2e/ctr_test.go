package e2e

import (
	"encoding/json"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/integration/fixture"
)

// TestCtr drives the main paths through bin/ctr against a real daemon:
// start --attach (output, exit status), a detached start, list, state and
// stats JSON, pause/resume, exec --attach, update, kill, events
// --stored-only --since, version.
func TestCtr(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	since := time.Now()

	// Attached: ctr prints the container's output and exits with its status.
	short := fixture.UniqueID(t) + "-short"
	b := fixture.NewBundle(t, fixture.Args("echo", "hello from init", "--", "stderr", "to stderr", "--", "exit", "3"))
	r := ctr(t, d, "containers", "start", "--attach", short, b.Path)
	if r.code != 3 || r.stdout != "hello from init\n" || !strings.Contains(r.stderr, "to stderr") {
		t.Fatalf("start --attach: exit %d, stdout %q, stderr %q; want 3, the init's output", r.code, r.stdout, r.stderr)
	}
	wantGone(t, d, short)

	// Detached: ctr returns once the container runs.
	id := fixture.UniqueID(t)
	lb := fixture.NewBundle(t)
	evs := d.SubscribeAfter(time.Now(), id)
	if out := ctrOK(t, d, "containers", "start", "--label", "team=e2e", id, lb.Path); out != "" {
		t.Errorf("detached start printed %q", out)
	}
	evs.Expect("start-container " + id)
	if st := state(t, d, id).Status; st != "running" {
		t.Fatalf("after a detached start: %s", st)
	}

	// list: the v0.2 table, and JSON.
	table := ctrOK(t, d, "containers", "list")
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "ID PATH STATUS PROCESSES" ||
		strings.Join(strings.Fields(lines[1]), " ") != strings.Join([]string{id, lb.Path, "running", "init"}, " ") {
		t.Fatalf("containers list:\n%s", table)
	}
	var listed []*types.Container
	if err := json.Unmarshal([]byte(ctrOK(t, d, "containers", "list", "--format", "json")), &listed); err != nil ||
		len(listed) != 1 || listed[0].Id != id || listed[0].Status != "running" {
		t.Fatalf("containers list --format json: %v, %v", listed, err)
	}

	// state: the StateResponse as JSON with the proto field names.
	raw := ctrOK(t, d, "state", id)
	for _, field := range []string{`"bundlePath"`, `"systemPid"`, `"machine"`} {
		if !strings.Contains(raw, field) {
			t.Errorf("state JSON has no %s:\n%s", field, raw)
		}
	}
	var st types.StateResponse
	if err := json.Unmarshal([]byte(raw), &st); err != nil || len(st.Containers) != 1 || st.Containers[0].BundlePath != lb.Path ||
		st.Containers[0].Labels[0] != "team=e2e" || int(st.Containers[0].Pids[0]) != initPid(t, d, id) {
		t.Fatalf("ctr state %s: %v\n%s", id, err, raw)
	}

	// stats: the StatsResponse as JSON.
	var stats types.StatsResponse
	raw = ctrOK(t, d, "containers", "stats", id)
	if err := json.Unmarshal([]byte(raw), &stats); err != nil ||
		stats.GetCgroupStats().GetMemoryStats().GetUsage().GetUsage() == 0 || stats.GetCgroupStats().GetPidsStats().GetCurrent() == 0 {
		t.Fatalf("ctr containers stats: %v\n%s", err, raw)
	}

	// pause / resume.
	ctrOK(t, d, "containers", "pause", id)
	evs.Expect("pause " + id)
	if s := state(t, d, id).Status; s != "paused" {
		t.Fatalf("after ctr pause: %s", s)
	}
	ctrOK(t, d, "containers", "resume", id)
	evs.Expect("resume " + id)
	if s := state(t, d, id).Status; s != "running" {
		t.Fatalf("after ctr resume: %s", s)
	}

	// exec --attach: output and status of the exec.
	r = ctr(t, d, "containers", "exec", "--id", id, "--pid", "e1", "--attach", "--", "/testinit", "echo", "from exec", "--", "exit", "5")
	if r.code != 5 || r.stdout != "from exec\n" {
		t.Fatalf("exec --attach: exit %d, stdout %q, stderr %q; want 5 and the exec's output", r.code, r.stdout, r.stderr)
	}
	evs.Expect("start-process "+id+" e1", "exit "+id+" e1 5")
	// A detached exec.
	ctrOK(t, d, "containers", "exec", "--id", id, "--pid", "e2", "--", "/testinit", "sleep", "forever")
	evs.Expect("start-process " + id + " e2")

	// update: the limit reaches the cgroup.
	const limit = 40 << 20
	ctrOK(t, d, "containers", "update", "--memory-limit", strconv.Itoa(limit), id)
	if got := readTrim(t, memoryCgroupFile(t, initPid(t, d, id), "memory.limit_in_bytes")); got != strconv.Itoa(limit) {
		t.Fatalf("memory.limit_in_bytes = %s after ctr update, want %d", got, limit)
	}

	// kill: an exec, then init.
	ctrOK(t, d, "containers", "kill", "--pid", "e2", "--signal", "TERM", id)
	evs.Expect("exit " + id + " e2 143")
	ctrOK(t, d, "containers", "kill", "-s", "9", id)
	evs.Expect("exit " + id + " init 137")

	// events --stored-only: the journal for one id, then ctr exits.
	out := ctrOK(t, d, "events", "--stored-only", "--since", "10m", "--id", id, "--format", "json")
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev struct {
			Type, ID, Pid string
			Status        uint32
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("events --format json line %q: %v", line, err)
		}
		got = append(got, strings.Join([]string{ev.Type, ev.ID, ev.Pid, strconv.Itoa(int(ev.Status))}, " "))
	}
	want := []string{"start-container " + id + "  0", "pause " + id + "  0", "resume " + id + "  0",
		"start-process " + id + " e1 0", "exit " + id + " e1 5", "start-process " + id + " e2 0",
		"exit " + id + " e2 143", "exit " + id + " init 137"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("ctr events --stored-only --id %s:\n got  %q\n want %q", id, got, want)
	}
	// The table form, all ids, since an RFC 3339 time.
	table = ctrOK(t, d, "events", "--stored-only", "--since", since.Format(time.RFC3339Nano))
	lines = strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 1+2+len(want) || strings.Join(strings.Fields(lines[0]), " ") != "TIME TYPE ID PID STATUS" ||
		!strings.Contains(lines[1], "start-container") || !strings.Contains(lines[1], short) {
		t.Fatalf("ctr events --stored-only --since %s (table):\n%s", since.Format(time.RFC3339Nano), table)
	}
}

// TestCtrErrors: ctr's errors print a message and exit non-zero, never a
// panic trace.
func TestCtrErrors(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := fixture.UniqueID(t)
	evs, _ := startAndWait(t, d, id, fixture.NewBundle(t))
	missing := t.TempDir() + "/no-bundle"

	tests := []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"containers", "start"}, "[ctr] container id cannot be empty"},
		{[]string{"containers", "start", "x"}, "[ctr] bundle path cannot be empty"},
		{[]string{"containers", "start", "x", missing}, "open " + missing + "/config.json: no such file or directory"},
		{[]string{"containers", "start", id, missing}, "file exists"}, // the id is checked first
		{[]string{"containers", "start", "../x", missing}, "invalid id"},
		{[]string{"containers", "kill", "no-such"}, "containerd: container not found"},
		{[]string{"containers", "kill", "--pid", "nope", id}, "containerd: process not found for container"},
		{[]string{"containers", "kill", "-s", "BOGUS", id}, `[ctr] invalid signal "BOGUS"`},
		{[]string{"containers", "kill"}, "[ctr] container id cannot be empty"},
		{[]string{"containers", "pause", "no-such"}, "containerd: container not found"},
		{[]string{"containers", "resume", id}, ""}, // resuming a running container: runc's error
		{[]string{"containers", "state", "no-such"}, "containerd: container not found"},
		{[]string{"containers", "stats", "no-such"}, "containerd: container not found"},
		{[]string{"containers", "exec", "--id", id, "--pid", "p"}, "[ctr] process args cannot be empty"},
		{[]string{"containers", "exec", "--id", id, "--pid", "init", "--", "/testinit"}, "file exists"},
		{[]string{"containers", "exec", "--id", id, "--pid", "p", "--attach", "--", "/no/such/binary"}, "oci runtime error: "},
		{[]string{"containers", "update", "--memory-limit", "lots", id}, `[ctr] --memory-limit "lots": not a number`},
		// A flag after the id would be ignored: ctr refuses instead.
		{[]string{"containers", "update", id, "--memory-limit", "1000000"}, "[ctr] unexpected arguments after the container id"},
		{[]string{"containers", "kill", id, "-s", "9"}, "[ctr] unexpected arguments after the container id"},
		{[]string{"containers", "list", "--format", "yaml"}, `[ctr] --format "yaml"`},
		{[]string{"checkpoints", "list", "no-such"}, "no such containers"},
		{[]string{"events", "--since", "yesterday"}, `[ctr] --since "yesterday"`},
		{[]string{"events", "--timestamp", "noon"}, `[ctr] --timestamp "noon"`},
		{[]string{"no-such-command"}, `unknown command "no-such-command"`},
		{[]string{"containers", "list", "--no-such-flag"}, "no-such-flag"},
		{[]string{"--address", "unix://" + missing + "/c.sock", "version"}, "no such file or directory"},
		{[]string{"--address", "nonsense", "version"}, "want proto://address"},
	}
	for _, tt := range tests {
		r := ctr(t, d, tt.args...)
		if r.code == 0 || !strings.Contains(r.stderr, tt.want) || strings.TrimSpace(r.stderr) == "" {
			t.Errorf("ctr %q: exit %d, stderr %q; want a non-zero exit and a message with %q", tt.args, r.code, r.stderr, tt.want)
		}
	}
	// None of it touched the container.
	if st := state(t, d, id); st.Status != "running" || len(st.Processes) != 1 {
		t.Fatalf("container after the bad ctr commands: %s, %d processes", st.Status, len(st.Processes))
	}
	signal(t, d, id, "init", syscall.SIGKILL)
	evs.Expect("exit " + id + " init 137")
}
