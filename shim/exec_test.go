package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/specs"
)

// TestExec: an exec gets its own shim and its own status, its output, and
// leaves the init running; a signal kills it with 128+signal.
func TestExec(t *testing.T) {
	fixture.RequireRoot(t)
	t.Parallel()
	c := newContainer(t, fixture.Args("sleep", "1h"))
	defer c.remove(t)
	init, _ := c.runInit(t)

	e := c.startShim(t, procOpts{name: "exec1", stdout: true, exec: execProcess("echo", "from exec", "--", "exit", "5")})
	e.started()
	if got := e.exited(); got != 5 {
		t.Fatalf("exec exitStatus %d, want 5", got)
	}
	if out := readAll(t, e.stdout); out != "from exec\n" {
		t.Errorf("exec stdout %q", out)
	}
	if st := c.status(t); st != "running" {
		t.Fatalf("init is %q after the exec ended, want running", st)
	}

	e2 := c.startShim(t, procOpts{name: "exec2", exec: execProcess("sleep", "1h")})
	pid := e2.started()
	if z := fixture.Zombies(e2.shimPid); len(z) > 0 {
		t.Errorf("zombies under the exec's shim: %v", z)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := e2.exited(); got != 143 {
		t.Fatalf("exec exitStatus %d, want 143", got)
	}

	c.mustRunc(t, "kill", c.id, "KILL")
	if got := init.exited(); got != 137 {
		t.Fatalf("init exitStatus %d, want 137", got)
	}
}

// TestExecLeftoverChild: an exec that exits leaving a child holding its
// stdout still gets its exit reported: the shim stops waiting for that
// output once it has been idle drainIdle, and says so in shim-log.json.
func TestExecLeftoverChild(t *testing.T) {
	fixture.RequireRoot(t)
	t.Parallel()
	c := newContainer(t, fixture.Args("sleep", "1h"))
	defer c.remove(t)
	buildInto(t, "./testdata/leaver", filepath.Join(c.bundle.Path, "rootfs", "leaver"))
	init, _ := c.runInit(t)

	leaver := &specs.ProcessSpec{Args: []string{"/leaver"}, Env: []string{"PATH=/"}, Cwd: "/"}
	e := c.startShim(t, procOpts{name: "leaver", stdout: true, exec: leaver})
	e.started()
	newLineReader(e.stdout).until(t, "left")
	if got := e.exited(); got != 7 {
		t.Fatalf("exec exitStatus %d, want 7", got)
	}
	if log := e.read("shim-log.json"); !strings.Contains(log, `"level":"warning"`) || !strings.Contains(log, "held open") {
		t.Errorf("shim-log.json lacks the warning: %q", log)
	}
	c.mustRunc(t, "kill", c.id, "KILL")
	if got := init.exited(); got != 137 {
		t.Fatalf("init exitStatus %d, want 137", got)
	}
}

// TestExecDirectOutput: an ephemeral exec with "directOutput" writes into
// its FIFOs itself (its fds 1 and 2 are the FIFOs, no pipe of the shim's
// between), all of its output arrives, and the FIFOs end with the process.
func TestExecDirectOutput(t *testing.T) {
	fixture.RequireRoot(t)
	t.Parallel()
	c := newContainer(t, fixture.Args("sleep", "1h"))
	defer c.remove(t)
	init, _ := c.runInit(t)

	e := c.startShim(t, procOpts{name: "direct", stdout: true, stderr: true, ephemeral: true, direct: true,
		exec: execProcess("echo", "to stdout", "--", "stderr", "to stderr", "--", "sleep", "1h")})
	pid := e.started()
	outs, errs := newLineReader(e.stdout), newLineReader(e.stderr)
	if before := outs.until(t, "to stdout"); len(before) > 0 {
		t.Errorf("stdout before the line: %q", before)
	}
	if before := errs.until(t, "to stderr"); len(before) > 0 {
		t.Errorf("stderr before the line: %q", before)
	}
	for fd, want := range map[string]string{"1": e.path("stdout"), "2": e.path("stderr")} {
		if got, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "fd", fd)); err != nil || got != want {
			t.Errorf("the exec's fd %s is %q (%v), want the FIFO %s itself", fd, got, err, want)
		}
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := e.exited(); got != 143 {
		t.Fatalf("exec exitStatus %d, want 143", got)
	}
	// Both end with the process: nothing more, then end of file.
	for _, l := range []*lineReader{outs, errs} {
		l.f.SetReadDeadline(time.Now().Add(wait))
		if rest, err := io.ReadAll(l.r); err != nil || len(rest) > 0 {
			t.Errorf("%s after the exit: %q, %v; want end of file", l.f.Name(), rest, err)
		}
	}
	c.mustRunc(t, "kill", c.id, "KILL")
	if got := init.exited(); got != 137 {
		t.Fatalf("init exitStatus %d, want 137", got)
	}
}

// buildInto builds a static helper program into dst.
func buildInto(t *testing.T, pkg, dst string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", dst, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v: %s", pkg, err, out)
	}
}

func execProcess(steps ...string) *specs.ProcessSpec {
	return &specs.ProcessSpec{Args: append([]string{"/testinit"}, steps...), Env: []string{"PATH=/"}, Cwd: "/"}
}
