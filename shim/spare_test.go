package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evjournal/containerd/integration/fixture"
	"golang.org/x/sys/unix"
)

// startSpare starts the shim as a spare, as the daemon does
// (docs/shim-contract.md, "Spares"): `<shim> --spare` in "/", the start
// pipe's write end as fd 3 and one end of a SOCK_SEQPACKET socketpair as
// fd 4. It returns the command and our end of the socket.
func startSpare(t *testing.T, shim string, start *os.File) (*exec.Cmd, int) {
	t.Helper()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	theirs := os.NewFile(uintptr(pair[1]), "assign")
	defer theirs.Close()
	cmd := exec.Command(shim, spareArg)
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{start, theirs}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, pair[0]
}

// assign sends a spare its process: the three arguments and the dir's fd.
func assign(t *testing.T, sock int, id, bundle, runtime, dir string) {
	t.Helper()
	msg, _ := json.Marshal(map[string]string{"id": id, "bundle": bundle, "runtime": runtime})
	dirfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dirfd)
	if err := unix.Sendmsg(sock, msg, unix.UnixRights(dirfd), nil, 0); err != nil {
		t.Fatalf("assign: %v", err)
	}
	unix.Close(sock)
}

// spareLaunch is a procOpts.launch that runs the shim as a spare and then
// assigns it the process the harness prepared.
func spareLaunch(t *testing.T) func(*exec.Cmd) int {
	return func(cmd *exec.Cmd) int {
		spare, sock := startSpare(t, cmd.Path, cmd.ExtraFiles[0])
		assign(t, sock, cmd.Args[1], cmd.Args[2], cmd.Args[3], cmd.Dir)
		return spare.Process.Pid
	}
}

// TestSpareRunsWhatItIsGiven: a shim started as a spare and then assigned
// an init, and another an (ephemeral) exec, behave as shims started for
// their processes: the start report, the pid files in the process's dir
// (its working directory), the output, the exit line and exitStatus.
func TestSpareRunsWhatItIsGiven(t *testing.T) {
	fixture.RequireRoot(t)
	t.Parallel()
	c := newContainer(t, fixture.Args("sleep", "1h"))
	defer c.remove(t)
	init := c.startShim(t, procOpts{launch: spareLaunch(t)})
	init.started()
	if got := strings.TrimSpace(init.read("shim.pid")); got != strconv.Itoa(init.shimPid) {
		t.Fatalf("shim.pid %q, the spare is %d", got, init.shimPid)
	}
	if cwd, _ := os.Readlink("/proc/" + strconv.Itoa(init.shimPid) + "/cwd"); cwd != init.dir {
		t.Fatalf("the spare's working directory is %q, want the process dir %q", cwd, init.dir)
	}
	c.mustRunc(t, "start", c.id)

	e := c.startShim(t, procOpts{name: "x", stdout: true, ephemeral: true, launch: spareLaunch(t),
		exec: execProcess("echo", "from a spare", "--", "exit", "5")})
	e.started()
	if got := e.exited(); got != 5 {
		t.Fatalf("exec exitStatus %d, want 5", got)
	}
	if out := readAll(t, e.stdout); out != "from a spare\n" {
		t.Errorf("exec stdout %q", out)
	}
	c.mustRunc(t, "kill", c.id, "KILL")
	if got := init.exited(); got != 137 {
		t.Fatalf("init exitStatus %d, want 137", got)
	}
}

// TestSpareExitsUnassigned: a spare whose daemon closes its end of the
// socket (the daemon stopped, or died) exits 0 at once, reporting nothing
// on its start pipe; so does one sent a message without a directory.
func TestSpareExitsUnassigned(t *testing.T) {
	shim := fixture.Shim(t)
	for _, tc := range []struct {
		name string
		end  func(sock int)
	}{
		{"closed", func(sock int) { unix.Close(sock) }},
		{"no dir fd", func(sock int) {
			unix.Sendmsg(sock, []byte(`{"id":"x","bundle":"/b","runtime":"runc"}`), nil, nil, 0)
			unix.Close(sock)
		}},
		{"garbage", func(sock int) {
			dirfd, _ := unix.Open(t.TempDir(), unix.O_RDONLY|unix.O_DIRECTORY, 0)
			unix.Sendmsg(sock, []byte(`not json`), unix.UnixRights(dirfd), nil, 0)
			unix.Close(dirfd)
			unix.Close(sock)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			cmd, sock := startSpare(t, shim, w)
			w.Close()
			tc.end(sock)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("the spare ended with %v, want exit 0", err)
				}
			case <-time.After(wait):
				t.Fatal("the spare did not exit")
			}
			r.SetReadDeadline(time.Now().Add(wait))
			if data, err := io.ReadAll(r); err != nil || len(data) != 0 {
				t.Fatalf("start pipe: %q, %v; want EOF with nothing", data, err)
			}
		})
	}
}

// TestParseAssignment: the assignment's three arguments, id and bundle
// required.
func TestParseAssignment(t *testing.T) {
	a, err := parseAssignment([]byte(`{"id":"c1","bundle":"/b","runtime":"runc","other":1}`))
	if err != nil || a != (args{id: "c1", bundle: "/b", runtime: "runc"}) {
		t.Fatalf("parse: %+v, %v", a, err)
	}
	for _, bad := range []string{`{"bundle":"/b"}`, `{"id":"c1"}`, `{"id":1,"bundle":"/b"}`, `[]`, ``} {
		if _, err := parseAssignment([]byte(bad)); err == nil {
			t.Errorf("parse %q: no error", bad)
		}
	}
}
