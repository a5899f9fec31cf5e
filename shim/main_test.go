package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evjournal/containerd/integration/fixture"
)

// The test binary doubles as helper programs, chosen by environment: a
// launcher (a stand-in for the daemon, killed while its shim lives on), a
// child that exits with a given status (for the reaper tests), and the
// pid-reuse scenario of TestUndoSparesReusedPid (undo_test.go).
const (
	launcherEnv = "SHIM_TEST_LAUNCHER"
	exitEnv     = "SHIM_TEST_EXIT"
)

func TestMain(m *testing.M) {
	if os.Getenv(launcherEnv) == "1" {
		os.Exit(launcher(os.Args[1:]))
	}
	if code := os.Getenv(exitEnv); code != "" {
		n, _ := strconv.Atoi(code)
		os.Exit(n)
	}
	if os.Getenv(undoReuseEnv) == "1" {
		os.Exit(undoReuseHelper())
	}
	fixture.Main(m)
}

// launcher starts argv (a shim) as the daemon does, passing on its own fd 3
// as the start pipe, prints the shim's pid, then waits to be killed.
func launcher(argv []string) int {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.ExtraFiles = []*os.File{os.NewFile(3, "start-pipe")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "launcher:", err)
		return 1
	}
	fmt.Println(cmd.Process.Pid)
	time.Sleep(time.Hour)
	return 0
}

// TestUsageErrorLeavesNoLog: run by hand with wrong arguments, the shim says
// so on stderr, exits 2 and writes nothing into the working directory.
func TestUsageErrorLeavesNoLog(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(fixture.Shim(t), "only-one-arg")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("exit: %v, want status 2", err)
	}
	if !strings.Contains(string(out), "usage: containerd-shim") {
		t.Fatalf("output %q, want the usage", out)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("the shim left %d files in its working directory", len(entries))
	}
}
