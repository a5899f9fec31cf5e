package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evjournal/containerd/api/types"
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
