package runtime_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/runtime"
	"golang.org/x/sys/unix"
)

// launcherEnv, when set, makes the test binary a stand-in daemon: it starts
// the container described by the JSON ContainerOpts in the variable, prints
// init's pid and waits to be killed.
const launcherEnv = "RUNTIME_TEST_LAUNCHER"

func launcherMain() int {
	var opts runtime.ContainerOpts
	if err := json.Unmarshal([]byte(os.Getenv(launcherEnv)), &opts); err != nil {
		fmt.Fprintln(os.Stderr, "launcher:", err)
		return 2
	}
	c, err := runtime.New(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "launcher:", err)
		return 2
	}
	p, err := c.Create(context.Background(), runtime.CreateOpts{})
	if err == nil {
		err = c.Start(context.Background())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "launcher:", err)
		return 2
	}
	fmt.Println(p.SystemPid())
	select {} // until SIGKILLed: the daemon dies without any cleanup
}

// launch runs a stand-in daemon that starts a container with opts, and
// SIGKILLs it once it reported init's pid.
func launch(t *testing.T, opts runtime.ContainerOpts) int {
	t.Helper()
	data, _ := json.Marshal(opts)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), launcherEnv+"="+string(data))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	pid, perr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || perr != nil {
		t.Fatalf("launcher: read pid: %v %v (%q)", err, perr, line)
	}
	return pid
}

// TestDaemonDeath: the daemon that started a container is SIGKILLed; the
// container runs on; a fresh Load finds it running and gets its hang-up
// when it dies; after a death with no daemon around, Load finds it stopped
// with the status the shim recorded.
func TestDaemonDeath(t *testing.T) {
	e := newEnv(t)
	opts := e.opts(fixture.UniqueID(t), fixture.NewBundle(t, sleeper).Path)
	pid := launch(t, opts)
	c := load(t, e.root, opts.ID)
	p := initOf(t, c)
	if p.State() != runtime.Running || p.SystemPid() != pid {
		t.Fatalf("loaded init: state %v pid %d, want running pid %d", p.State(), p.SystemPid(), pid)
	}
	if got := status(t, c); got != "running" {
		t.Fatalf("runc status = %q", got)
	}
	ex, err := c.Exec(context.Background(), "after-restart", execSpec("exit", "4"), runtime.Stdio{})
	if err != nil {
		t.Fatalf("Exec on a loaded container: %v", err)
	}
	wantStatus(t, ex, 4)
	syscall.Kill(pid, syscall.SIGKILL)
	wantStatus(t, p, 137) // the loaded process's exit fd hangs up

	c2 := load(t, e.root, opts.ID)
	p2 := initOf(t, c2)
	if p2.State() != runtime.Stopped || p2.ExitFD() != -1 {
		t.Fatalf("reloaded dead init: state %v exit fd %d", p2.State(), p2.ExitFD())
	}
	if st, reason := p2.ExitStatus(); st != 137 || reason != "" {
		t.Fatalf("reloaded exit status %d (%q), want 137", st, reason)
	}
}

// TestDeathWhileAway: the container dies while no daemon runs at all; the
// next Load reports it stopped with the real status.
func TestDeathWhileAway(t *testing.T) {
	e := newEnv(t)
	opts := e.opts(fixture.UniqueID(t), fixture.NewBundle(t, sleeper).Path)
	pid := launch(t, opts)
	c := load(t, e.root, opts.ID)
	shim := shimPid(t, c)
	closeAll(c) // no daemon around from here
	syscall.Kill(pid, syscall.SIGKILL)
	waitGone(t, shim)

	c2 := load(t, e.root, opts.ID)
	p2 := initOf(t, c2)
	if p2.State() != runtime.Stopped {
		t.Fatalf("state = %v, want stopped", p2.State())
	}
	if st, reason := p2.ExitStatus(); st != 137 || reason != "" {
		t.Fatalf("exit status %d (%q), want 137 recorded by the shim", st, reason)
	}
}

func load(t *testing.T, root, id string) *runtime.Container {
	t.Helper()
	c, err := runtime.Load(root, id)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	t.Cleanup(func() { deleteContainer(t, c) })
	return c
}

func initOf(t *testing.T, c *runtime.Container) *runtime.Process {
	t.Helper()
	p, ok := c.Process("init")
	if !ok {
		t.Fatalf("container %s has no init", c.ID())
	}
	return p
}

func closeAll(c *runtime.Container) {
	for _, p := range c.Processes() {
		p.Close()
	}
}

func shimPid(t *testing.T, c *runtime.Container) int {
	t.Helper()
	data, err := os.ReadFile(c.Dir() + "/init/shim.pid")
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid
}

// waitGone waits (bounded) for pid to exit, polling a pidfd for it.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return // already gone
	}
	defer unix.Close(fd)
	if !pollIn(fd, waitLimit) {
		t.Fatalf("pid %d still running after %v", pid, waitLimit)
	}
}
