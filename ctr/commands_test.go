package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evjournal/containerd/api/types"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestContainersList(t *testing.T) {
	api := newFakeAPI()
	api.state = &types.StateResponse{Containers: []*types.Container{
		{Id: "b", BundlePath: "/b", Status: "running", Processes: []*types.Process{{Pid: "init"}, {Pid: "e1"}}},
		{Id: "a", BundlePath: "/a", Status: "paused", Processes: []*types.Process{{Pid: "init"}}},
	}}
	addr, _ := serveFake(t, api)
	for _, args := range [][]string{{"containers"}, {"containers", "list"}, {"containers", "ls"}} {
		code, out, errOut := runCtr(t, "", append([]string{"--address", addr}, args...)...)
		if code != 0 || errOut != "" {
			t.Fatalf("%v: code %d, stderr %q", args, code, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") || !strings.HasPrefix(lines[1], "a ") ||
			!strings.HasSuffix(lines[2], "init,e1") {
			t.Fatalf("%v: output\n%s", args, out)
		}
	}
	code, out, _ := runCtr(t, "", "--address", addr, "containers", "list", "--format", "json", "a")
	var cs []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &cs) != nil || cs[0]["bundlePath"] != "/a" {
		t.Fatalf("json: code %d, output %s", code, out)
	}
	if r := api.last(&types.StateRequest{}).(*types.StateRequest); r.GetId() != "a" {
		t.Fatalf("state request %v", r)
	}
	// `containers ID` lists that container, like v0.2.9.
	runCtr(t, "", "--address", addr, "containers", "b")
	if r := api.last(&types.StateRequest{}).(*types.StateRequest); r.GetId() != "b" {
		t.Fatalf("state request %v", r)
	}
}

func TestStartDetached(t *testing.T) {
	api := newFakeAPI()
	addr, _ := serveFake(t, api)
	bundle := t.TempDir()
	code, out, errOut := runCtr(t, "", "--address", addr, "containers", "start", "-l", "x=1", "-l", "y", "c1", bundle)
	if code != 0 || out != "" || errOut != "" {
		t.Fatalf("code %d, stdout %q, stderr %q", code, out, errOut)
	}
	r := api.last(&types.CreateContainerRequest{}).(*types.CreateContainerRequest)
	if r.GetId() != "c1" || r.GetBundlePath() != bundle || r.GetRuntime() != "" || r.GetRuntimeArgs() != nil ||
		r.GetStdin() != "" || r.GetStdout() != "" || r.GetStderr() != "" || strings.Join(r.GetLabels(), ";") != "x=1;y" {
		t.Fatalf("request %v", r)
	}
}

func TestStartDetachedToFiles(t *testing.T) {
	api := newFakeAPI()
	addr, _ := serveFake(t, api)
	dir := t.TempDir()
	t.Chdir(dir)
	os.Mkdir("bundle", 0o755)
	os.WriteFile("out.log", []byte("a previous run's output"), 0o644)
	code, _, errOut := runCtr(t, "", "--address", addr, "containers", "start", "--stdout", "out.log",
		"--runtime", "crun", "--runtime-args", "--root=/r,x", "c1", "bundle")
	if code != 0 {
		t.Fatalf("code %d: %s", code, errOut)
	}
	r := api.last(&types.CreateContainerRequest{}).(*types.CreateContainerRequest)
	if r.GetStdout() != filepath.Join(dir, "out.log") || r.GetBundlePath() != filepath.Join(dir, "bundle") ||
		r.GetRuntime() != "crun" || strings.Join(r.GetRuntimeArgs(), " ") != "--root=/r,x" {
		t.Fatalf("request %v", r)
	}
	if _, err := os.Stat("out.log"); err == nil {
		t.Fatal("the stdout file is still there: the daemon refuses to write into an existing file")
	}
}

// writeOutput is an onCreate that writes into the process's stdout FIFO,
// as a shim would.
func writeOutput(t *testing.T, text string) func(string) {
	return func(path string) {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Errorf("open stdout fifo: %v", err)
			return
		}
		f.WriteString(text)
		f.Close()
	}
}

func TestStartAttached(t *testing.T) {
	api := newFakeAPI()
	api.onCreate = writeOutput(t, "hello\n")
	// The process exits only once its stdin is closed: ctr must close it on
	// its local stdin's EOF (here at once) or the exit never comes.
	api.readsStdin = true
	api.events = []*types.Event{
		{Type: "exit", Id: "c1", Pid: "init", Status: 1, Timestamp: ts(1)}, // an earlier incarnation
		{Type: "start-container", Id: "c1", Timestamp: ts(2), Seq: 2},
		{Type: "exit", Id: "c1", Pid: "init", Status: 3, Timestamp: ts(3), Seq: 3},
	}
	addr, _ := serveFake(t, api)
	code, out, errOut := runCtr(t, "", "--address", addr, "containers", "start", "-a", "c1", t.TempDir())
	if code != 3 || out != "hello\n" || errOut != "" {
		t.Fatalf("code %d, stdout %q, stderr %q", code, out, errOut)
	}
	ev := api.last(&types.EventsRequest{}).(*types.EventsRequest)
	if ev.GetId() != "c1" || ev.GetTimestamp() == nil {
		t.Fatalf("events request %v", ev)
	}
	r := api.last(&types.CreateContainerRequest{}).(*types.CreateContainerRequest)
	dir := filepath.Dir(r.GetStdin())
	if !strings.HasPrefix(filepath.Base(dir), "ctr-") {
		t.Fatalf("fifo dir %s", dir)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("fifo dir %s not removed", dir)
	}
	// Local stdin was empty: the process's stdin was closed (before its
	// exit could come).
	up, _ := api.last(&types.UpdateProcessRequest{}).(*types.UpdateProcessRequest)
	if up == nil || !up.GetCloseStdin() || up.GetPid() != "init" {
		t.Fatalf("close-stdin request: %v", up)
	}
}

func TestExecAttached(t *testing.T) {
	api := newFakeAPI()
	api.onCreate = writeOutput(t, "out")
	api.events = []*types.Event{
		{Type: "start-process", Id: "c1", Pid: "e1", Timestamp: ts(2)},
		{Type: "exit", Id: "c1", Pid: "e1", Status: 7, Timestamp: ts(3)},
	}
	addr, _ := serveFake(t, api)
	code, out, _ := runCtr(t, "", "--address", addr, "containers", "exec", "--id", "c1", "--pid", "e1", "-a",
		"-e", "A=1", "-u", "1000", "--cap", "CAP_KILL", "--", "sh", "-c", "echo out")
	if code != 7 || out != "out" {
		t.Fatalf("code %d, stdout %q", code, out)
	}
	r := api.last(&types.AddProcessRequest{}).(*types.AddProcessRequest)
	if strings.Join(r.GetArgs(), " ") != "sh -c echo out" || r.GetUser().GetUid() != 1000 || r.GetCwd() != "/" ||
		strings.Join(r.GetEnv(), " ") != "A=1" || r.GetCapabilities()[0] != "CAP_KILL" {
		t.Fatalf("request %v", r)
	}
}

func TestExecDetachedDefaults(t *testing.T) {
	api := newFakeAPI()
	addr, _ := serveFake(t, api)
	if code, _, errOut := runCtr(t, "", "--address", addr, "containers", "exec", "--id", "c1", "--pid", "e1", "true"); code != 0 {
		t.Fatalf("code %d: %s", code, errOut)
	}
	r := api.last(&types.AddProcessRequest{}).(*types.AddProcessRequest)
	if r.GetUser() == nil || len(r.GetEnv()) != 1 || !strings.HasPrefix(r.GetEnv()[0], "PATH=") || r.GetStdout() != "" {
		t.Fatalf("request %v", r)
	}
}

// The daemon going away while ctr waits for the exit ends ctr with 129.
func TestAttachedDaemonGone(t *testing.T) {
	api := newFakeAPI()
	api.events = []*types.Event{{Type: "start-container", Id: "c1", Timestamp: ts(2)}}
	addr, g := serveFake(t, api)
	api.onCreate = func(string) {
		go func() {
			api.waitFor(t, func() bool { _, ok := api.last(&types.UpdateProcessRequest{}).(*types.UpdateProcessRequest); return ok })
			g.Stop()
		}()
	}
	code, _, _ := runCtr(t, "", "--address", addr, "containers", "start", "-a", "c1", t.TempDir())
	if code != 129 {
		t.Fatalf("code %d, want 129", code)
	}
}

func TestSimpleCommands(t *testing.T) {
	api := newFakeAPI()
	addr, _ := serveFake(t, api)
	run := func(args ...string) string {
		t.Helper()
		code, out, errOut := runCtr(t, "", append([]string{"--address", addr}, args...)...)
		if code != 0 {
			t.Fatalf("%v: code %d: %s", args, code, errOut)
		}
		return out
	}
	if out := run("version"); out != "daemon version 0.2.9 commit: abc\n" {
		t.Fatalf("version %q", out)
	}
	run("containers", "kill", "-s", "KILL", "-p", "e1", "c1")
	if r := api.last(&types.SignalRequest{}).(*types.SignalRequest); r.GetSignal() != 9 || r.GetPid() != "e1" || r.GetId() != "c1" {
		t.Fatalf("signal %v", r)
	}
	run("containers", "kill", "c1")
	if r := api.last(&types.SignalRequest{}).(*types.SignalRequest); r.GetSignal() != 15 || r.GetPid() != "init" {
		t.Fatalf("signal %v", r)
	}
	run("containers", "pause", "c1")
	if r := api.last(&types.UpdateContainerRequest{}).(*types.UpdateContainerRequest); r.GetStatus() != "paused" || r.GetPid() != "init" {
		t.Fatalf("pause %v", r)
	}
	run("containers", "resume", "c1")
	if r := api.last(&types.UpdateContainerRequest{}).(*types.UpdateContainerRequest); r.GetStatus() != "running" {
		t.Fatalf("resume %v", r)
	}
	run("containers", "update", "--cpu-shares", "0x200", "--memory-limit", "1048576", "c1")
	if r := api.last(&types.UpdateContainerRequest{}).(*types.UpdateContainerRequest); r.GetStatus() != "" ||
		r.GetResources().GetCpuShares() != 512 || r.GetResources().GetMemoryLimit() != 1<<20 {
		t.Fatalf("update %v", r)
	}
	if out := run("state"); !strings.Contains(out, `"cpus": 1`) {
		t.Fatalf("state %s", out)
	}
	if out := run("checkpoints", "c1"); !strings.Contains(out, "NAME") || !strings.Contains(out, "cp1") {
		t.Fatalf("checkpoints %s", out)
	}
	if out := run("checkpoints", "list", "--format", "json", "c1"); !strings.Contains(out, `"name": "cp1"`) {
		t.Fatalf("checkpoints json %s", out)
	}
	run("checkpoints", "create", "--exit", "--empty-ns", "network", "c1", "cp2")
	if r := api.last(&types.CreateCheckpointRequest{}).(*types.CreateCheckpointRequest); r.GetCheckpoint().GetName() != "cp2" ||
		!r.GetCheckpoint().GetExit() || r.GetCheckpoint().GetEmptyNS()[0] != "network" {
		t.Fatalf("checkpoint %v", r)
	}
}

// TestStatsCompact: `ctr containers stats` prints one line of JSON, as
// v0.2.9's did (scripts grep it).
func TestStatsCompact(t *testing.T) {
	addr, _ := serveFake(t, newFakeAPI())
	code, out, errOut := runCtr(t, "", "--address", addr, "containers", "stats", "c1")
	var v map[string]any
	if code != 0 || strings.Count(out, "\n") != 1 || json.Unmarshal([]byte(out), &v) != nil || !strings.Contains(out, `"usage":8388608`) {
		t.Fatalf("code %d, stdout %q, stderr %q: want one compact JSON line", code, out, errOut)
	}
}

// TestEventsHeaderAtOnce: the table header does not wait for an event.
func TestEventsHeaderAtOnce(t *testing.T) {
	addr, _ := serveFake(t, newFakeAPI())
	code, out, errOut := runCtr(t, "", "--address", addr, "events", "--stored-only")
	if code != 0 || !strings.HasPrefix(out, "TIME") || strings.Count(out, "\n") != 1 {
		t.Fatalf("code %d, stdout %q, stderr %q: want just the header", code, out, errOut)
	}
}

func TestEventsStoredOnly(t *testing.T) {
	api := newFakeAPI()
	api.events = []*types.Event{
		{Type: "start-container", Id: "c1", Timestamp: ts(1), Seq: 1},
		{Type: "exit", Id: "c1", Pid: "init", Status: 3, Timestamp: ts(2), Seq: 2},
	}
	addr, _ := serveFake(t, api)
	code, out, errOut := runCtr(t, "", "--address", addr, "events", "--stored-only", "--id", "c1")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "TIME") || !strings.Contains(lines[2], "exit") {
		t.Fatalf("code %d, stdout %q, stderr %q", code, out, errOut)
	}
	r := api.last(&types.EventsRequest{}).(*types.EventsRequest)
	if !r.GetStoredOnly() || r.GetId() != "c1" || r.GetTimestamp() == nil || r.GetTimestamp().GetSeconds() != 0 {
		t.Fatalf("request %v", r)
	}
	code, out, _ = runCtr(t, "", "--address", addr, "events", "--stored-only", "--format", "json")
	var ev map[string]any
	if code != 0 || json.Unmarshal([]byte(strings.Split(out, "\n")[1]), &ev) != nil || ev["status"] != 3.0 || ev["seq"] != 2.0 {
		t.Fatalf("json: code %d, %q", code, out)
	}
}

// TestEventsTableColumnsLineUp: each value starts where its header does,
// empty cells included; an ID longer than its column shifts only the rest
// of its own row.
func TestEventsTableColumnsLineUp(t *testing.T) {
	api := newFakeAPI()
	api.events = []*types.Event{
		{Type: "start-container", Id: "c1", Timestamp: ts(1), Seq: 1},
		{Type: "start-process", Id: "a-container-id-longer-than-its-column", Pid: "exec-1", Timestamp: ts(2), Seq: 2},
		{Type: "exit", Id: "c1", Pid: "init", Status: 137, Timestamp: &timestamppb.Timestamp{Seconds: 3, Nanos: 5}, Seq: 3},
	}
	addr, _ := serveFake(t, api)
	code, out, errOut := runCtr(t, "", "--address", addr, "events", "--stored-only")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) != 4 {
		t.Fatalf("code %d, stdout %q, stderr %q: want a header and 3 rows", code, out, errOut)
	}
	header := lines[0]
	cols := []string{"TIME", "TYPE", "ID", "PID", "STATUS"}
	for i, ev := range api.events {
		row := lines[i+1]
		cells := []string{ev.GetTimestamp().AsTime().Local().Format(tableTime), ev.GetType(), ev.GetId(), ev.GetPid(), fmt.Sprint(ev.GetStatus())}
		for k, cell := range cells {
			if cell == "" || (k > 2 && len(ev.GetId()) >= strings.Index(header, "PID")-strings.Index(header, "ID")) {
				continue // an empty cell; or after the long ID, which shifts them
			}
			at := strings.Index(header, cols[k])
			if !strings.HasPrefix(row[at:], cell+" ") && row[at:] != cell || (at > 0 && row[at-1] != ' ') {
				t.Errorf("row %d: %s %q is not under its header (column %d)\n%s", i+1, cols[k], cell, at, out)
			}
		}
	}
}

// TestEventsJSONCarriesExtensions: `--format json` prints the journalId
// that --journal-id asks for, and an exit's exitedAt.
func TestEventsJSONCarriesExtensions(t *testing.T) {
	exited := time.Date(2024, 3, 4, 5, 6, 7, 8, time.UTC)
	api := newFakeAPI()
	api.events = []*types.Event{
		{Type: "start-container", Id: "c1", Timestamp: ts(1), Seq: 1, JournalId: "0123456789abcdef0123456789abcdef"},
		{Type: "exit", Id: "c1", Pid: "init", Status: 3, Timestamp: ts(2), Seq: 2, JournalId: "0123456789abcdef0123456789abcdef",
			ExitedAt: timestamppb.New(exited)},
	}
	addr, _ := serveFake(t, api)
	code, out, errOut := runCtr(t, "", "--address", addr, "events", "--stored-only", "--format", "json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 {
		t.Fatalf("code %d, stdout %q, stderr %q: want 2 JSON lines", code, out, errOut)
	}
	var start, exit map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &start); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &exit); err != nil {
		t.Fatal(err)
	}
	if start["journalId"] != "0123456789abcdef0123456789abcdef" || exit["journalId"] != start["journalId"] {
		t.Errorf("journalId missing: %s", out)
	}
	if _, ok := start["exitedAt"]; ok {
		t.Errorf("start-container has an exitedAt: %s", lines[0])
	}
	got, err := time.Parse(time.RFC3339Nano, fmt.Sprint(exit["exitedAt"]))
	if err != nil || !got.Equal(exited) {
		t.Errorf("exitedAt %v (%v), want %s: %s", exit["exitedAt"], err, exited, lines[1])
	}
}

// TestNoDaemonFailsAtOnce: with no socket at the path, or a socket nobody
// listens on (a daemon that died), ctr fails at once naming the path, not
// after --conn-timeout.
func TestNoDaemonFailsAtOnce(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	lis, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	lis.(*net.UnixListener).SetUnlinkOnClose(false)
	lis.Close()
	tests := []struct{ name, sock, errno string }{
		{"no socket", filepath.Join(dir, "no.sock"), "no such file or directory"},
		{"nobody listening", stale, "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCtrWithin(t, 10*time.Second, "--address", "unix://"+tt.sock, "--conn-timeout", "1h", "version")
			want := "ctr: cannot connect to the daemon at unix://" + tt.sock + ": dial unix " + tt.sock + ": connect: " + tt.errno + "\n"
			if code != 1 || out != "" || errOut != want {
				t.Fatalf("code %d, stdout %q, stderr %q; want 1 and %q", code, out, errOut, want)
			}
		})
	}
}

// runCtrWithin is runCtr failing the test if ctr has not returned within d.
func runCtrWithin(t *testing.T, d time.Duration, args ...string) (int, string, string) {
	t.Helper()
	type result struct {
		code        int
		out, errOut string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errOut := runCtr(t, "", args...)
		done <- result{code, out, errOut}
	}()
	select {
	case r := <-done:
		return r.code, r.out, r.errOut
	case <-time.After(d):
		t.Fatalf("ctr %q still running after %s", args, d)
		return 0, "", ""
	}
}
