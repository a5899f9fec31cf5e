package main

import (
	"encoding/json"
	"fmt"
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
	"golang.org/x/sys/unix"
)

// wait bounds every wait of these tests on a shim, runc or a container.
const wait = 20 * time.Second

// container is one test container: a bundle, a private runc root and a state
// dir laid out as the daemon does (<state>/<id>/<process-id>/).
type container struct {
	id     string
	root   string
	state  string
	bundle *fixture.Bundle
	runc   string
	shim   string
}

func newContainer(t *testing.T, opts ...fixture.Option) *container {
	t.Helper()
	c := &container{
		id:     fixture.UniqueID(t),
		root:   fixture.RuncRoot(t),
		state:  t.TempDir(),
		bundle: fixture.NewBundle(t, opts...),
		runc:   fixture.Runc(t),
		shim:   fixture.Shim(t),
	}
	return c
}

// runcCmd runs `runc --root R args...` and returns its combined output.
func (c *container) runcCmd(args ...string) (string, error) {
	out, err := exec.Command(c.runc, append([]string{"--root", c.root}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func (c *container) mustRunc(t *testing.T, args ...string) string {
	t.Helper()
	out, err := c.runcCmd(args...)
	if err != nil {
		t.Fatalf("runc %v: %v: %s", args, err, out)
	}
	return out
}

// status is what `runc state` says of the container ("" if it does not exist).
func (c *container) status(t *testing.T) string {
	t.Helper()
	out, err := c.runcCmd("state", c.id)
	if err != nil {
		return ""
	}
	var st struct{ Status string }
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("runc state: %v: %s", err, out)
	}
	return st.Status
}

// procOpts describe one shim run: the init (default) or an exec.
type procOpts struct {
	name     string              // process id; "init" when empty
	exec     *specs.ProcessSpec  // set for an exec
	stdin    bool                // make a stdin FIFO
	stdout   bool                // make a stdout FIFO
	stderr   bool                // make a stderr FIFO
	terminal bool                // ask for a pty
	logPath  string              // a CRI log for stdout and stderr (then both unset)
	launch   func(*exec.Cmd) int // starts the shim instead of cmd.Start; returns its pid
	// ephemeral marks an exec "ephemeral" (its files written unsynced).
	ephemeral bool
	// direct asks for "directOutput" (with ephemeral).
	direct bool
}

// proc is one shim, started as the daemon starts it (docs/shim-contract.md):
// FIFOs made and the exit FIFO opened before the start, process.json
// written, the start pipe as fd 3, its own session.
type proc struct {
	t       *testing.T
	c       *container
	dir     string
	exitFd  int      // read end of the exit FIFO, O_RDONLY|O_NONBLOCK
	start   *os.File // read end of the start pipe
	cmd     *exec.Cmd
	shimPid int
	stdout  *os.File // read ends of the output FIFOs, or nil
	stderr  *os.File
}

func (c *container) startShim(t *testing.T, o procOpts) *proc {
	t.Helper()
	if o.name == "" {
		o.name = "init"
	}
	p := &proc{t: t, c: c, dir: filepath.Join(c.state, c.id, o.name), exitFd: -1}
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p.mkfifo("exit")
	p.mkfifo("control")
	fd, err := unix.Open(p.path("exit"), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	p.exitFd = fd
	t.Cleanup(func() { unix.Close(fd) })
	p.writeProcessJSON(o)
	p.spawn(o)
	return p
}

// runInit starts the init's shim, waits for its report and starts the
// init (`runc start`): the running container that execs are made in. It
// returns the init's shim and pid.
func (c *container) runInit(t *testing.T) (*proc, int) {
	t.Helper()
	init := c.startShim(t, procOpts{})
	pid := init.started()
	c.mustRunc(t, "start", c.id)
	return init, pid
}

func (p *proc) path(name string) string { return filepath.Join(p.dir, name) }

func (p *proc) mkfifo(name string) string {
	p.t.Helper()
	if err := unix.Mkfifo(p.path(name), 0o600); err != nil {
		p.t.Fatal(err)
	}
	return p.path(name)
}

// outFifo makes an output FIFO and opens its read end now, before the shim
// starts; it is read only once the shim has opened its side.
func (p *proc) outFifo(name string) (string, *os.File) {
	p.t.Helper()
	path := p.mkfifo(name)
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { f.Close() })
	return path, f
}

func (p *proc) writeProcessJSON(o procOpts) {
	p.t.Helper()
	cfg := map[string]any{
		"exec":        o.exec != nil,
		"process":     o.exec,
		"terminal":    o.terminal,
		"runtime":     p.c.runc,
		"runtimeArgs": []string{"--root", p.c.root},
	}
	if o.exec == nil {
		cfg["process"] = p.c.bundle.Spec.Process
	}
	cfg["stdin"], cfg["stdout"], cfg["stderr"] = "", "", ""
	if o.stdin {
		cfg["stdin"] = p.mkfifo("stdin")
	}
	if o.stdout {
		cfg["stdout"], p.stdout = p.outFifo("stdout")
	}
	if o.stderr {
		cfg["stderr"], p.stderr = p.outFifo("stderr")
	}
	if o.logPath != "" {
		cfg["logPath"] = o.logPath
	}
	if o.ephemeral {
		cfg["ephemeral"] = true
	}
	if o.direct {
		cfg["directOutput"] = true
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(p.path("process.json"), data, 0o600); err != nil {
		p.t.Fatal(err)
	}
}

func (p *proc) spawn(o procOpts) {
	p.t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		p.t.Fatal(err)
	}
	p.start = r
	p.t.Cleanup(func() { r.Close() })
	cmd := exec.Command(p.c.shim, p.c.id, p.c.bundle.Path, p.c.runc)
	cmd.Dir = p.dir
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if o.launch != nil {
		p.shimPid = o.launch(cmd)
	} else {
		if err := cmd.Start(); err != nil {
			p.t.Fatal(err)
		}
		p.cmd, p.shimPid = cmd, cmd.Process.Pid
		p.t.Cleanup(p.reapShim)
	}
	w.Close()
}

// reapShim kills and reaps a shim the test left running (a failed test).
func (p *proc) reapShim() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	}
}

// startResult reads the one line of the start pipe.
func (p *proc) startResult() (pid int, errMsg string) {
	p.t.Helper()
	p.start.SetReadDeadline(time.Now().Add(wait))
	data, err := io.ReadAll(p.start)
	if err != nil {
		p.t.Fatalf("start pipe: %v (read %q)", err, data)
	}
	var res struct {
		Pid   int    `json:"pid"`
		Error string `json:"error"`
	}
	if len(data) == 0 || data[len(data)-1] != '\n' || strings.Count(string(data), "\n") != 1 {
		p.t.Fatalf("start pipe: want one JSON line, got %q", data)
	}
	if err := json.Unmarshal(data, &res); err != nil {
		p.t.Fatalf("start pipe: %v: %q", err, data)
	}
	return res.Pid, res.Error
}

// started asserts the start succeeded and returns the process's pid.
func (p *proc) started() int {
	p.t.Helper()
	pid, msg := p.startResult()
	if msg != "" || pid <= 0 {
		p.t.Fatalf("start failed: pid %d, error %q; shim log: %s", pid, msg, p.read("shim-log.json"))
	}
	if got := strings.TrimSpace(p.read("pid")); got != strconv.Itoa(pid) {
		p.t.Fatalf("pid file %q, start pipe said %d", got, pid)
	}
	for _, f := range []string{"starttime", "shim.pid", "shim.starttime"} {
		if p.read(f) == "" {
			p.t.Fatalf("%s is empty or missing after the start", f)
		}
	}
	return pid
}

func (p *proc) read(name string) string {
	data, _ := os.ReadFile(p.path(name))
	return string(data)
}

// hungUp polls the exit FIFO: true once the shim's write end is gone. The
// shim writes one status line just before it closes its end, so POLLIN
// alone (the line, not yet the close) means: poll again.
func (p *proc) hungUp(timeout time.Duration) bool {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		fds := []unix.PollFd{{Fd: int32(p.exitFd), Events: unix.POLLIN}}
		ms := int(time.Until(deadline) / time.Millisecond)
		if ms < 0 {
			ms = 0
		}
		n, err := unix.Poll(fds, ms)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			p.t.Fatalf("poll exit fifo: %v", err)
		}
		if n > 0 && fds[0].Revents&unix.POLLHUP != 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// exitLine reads what the shim wrote on the exit FIFO before it hung up:
// "<status> <reap unix ns>". ok is false when nothing was written.
func (p *proc) exitLine() (status int, reaped time.Time, ok bool) {
	p.t.Helper()
	buf := make([]byte, 128)
	n, err := unix.Read(p.exitFd, buf)
	if err == unix.EAGAIN || n <= 0 {
		return 0, time.Time{}, false
	}
	if err != nil {
		p.t.Fatalf("read exit fifo: %v", err)
	}
	line := string(buf[:n])
	f := strings.Fields(line)
	if !strings.HasSuffix(line, "\n") || strings.Count(line, "\n") != 1 || len(f) != 2 {
		p.t.Fatalf("exit fifo: want one line \"<status> <unix ns>\", got %q", line)
	}
	status, err1 := strconv.Atoi(f[0])
	ns, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		p.t.Fatalf("exit fifo line %q: %v %v", line, err1, err2)
	}
	return status, time.Unix(0, ns), true
}

// notified waits for the exit FIFO to hang up and returns the status the
// shim wrote on it; the shim itself may still be draining output.
func (p *proc) notified() int {
	p.t.Helper()
	if !p.hungUp(wait) {
		p.t.Fatalf("exit fifo did not hang up within %v; shim log: %s", wait, p.read("shim-log.json"))
	}
	status, reaped, ok := p.exitLine()
	if !ok {
		p.t.Fatalf("exit fifo hung up without a status line; shim log: %s", p.read("shim-log.json"))
	}
	if d := time.Since(reaped); d < 0 || d > wait {
		p.t.Errorf("reap time %v is %v from now", reaped, d)
	}
	return status
}

// exited waits for the exit FIFO to hang up and returns the status the
// shim wrote on it, which must equal exitStatus as it is at that instant:
// the file must already be there. It also checks the shim exited 0.
func (p *proc) exited() int {
	p.t.Helper()
	status := p.notified()
	data, err := os.ReadFile(p.path("exitStatus"))
	if err != nil {
		p.t.Fatalf("exitStatus missing when the exit fifo hung up: %v", err)
	}
	if file, err := strconv.Atoi(string(data)); err != nil || file != status {
		p.t.Fatalf("exitStatus %q, exit fifo said %d", data, status)
	}
	p.checkModes()
	if p.cmd != nil {
		if err := p.cmd.Wait(); err != nil {
			p.t.Fatalf("shim: %v; shim log: %s", err, p.read("shim-log.json"))
		}
	}
	return status
}

// checkModes: every file the shim made is 0600 and no temp file is left.
func (p *proc) checkModes() {
	p.t.Helper()
	entries, err := os.ReadDir(p.dir)
	if err != nil {
		p.t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			p.t.Errorf("temp file %s left in the state dir", e.Name())
		}
		fi, err := e.Info()
		if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm() != 0o600 {
			p.t.Errorf("%s has mode %v, want 0600", e.Name(), fi.Mode().Perm())
		}
	}
}

// alive: pid exists and is not a zombie.
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	state, err := statField(data, 3)
	return err == nil && state != "Z"
}

// parentOf is the parent pid of pid.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f, err := statField(data, 4)
	if err != nil {
		t.Fatal(err)
	}
	ppid, _ := strconv.Atoi(f)
	return ppid
}

// remove deletes the container; the runc root's cleanup forces it anyway.
func (c *container) remove(t *testing.T) {
	t.Helper()
	if out, err := c.runcCmd("delete", "--force", c.id); err != nil && !strings.Contains(out, "does not exist") {
		t.Errorf("runc delete: %v: %s", err, out)
	}
}
