package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cdt") // socket paths must stay short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestListenUnix(t *testing.T) {
	dir := shortTempDir(t)
	path := filepath.Join(dir, "sub", "c.sock")
	lis, err := listenUnix(path, os.Getgid())
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o660 || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("socket mode %v, want 0660 socket", fi.Mode())
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Gid) != os.Getgid() {
		t.Fatalf("socket gid %d", st.Gid)
	}
	// A live socket is not taken over.
	if _, err := listenUnix(path, -1); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("live socket: %v", err)
	}
	lis.(*net.UnixListener).SetUnlinkOnClose(false)
	lis.Close()
	// A stale one is replaced.
	lis, err = listenUnix(path, -1)
	if err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	lis.Close()
	// Anything else is left alone.
	other := filepath.Join(dir, "file")
	os.WriteFile(other, []byte("data"), 0o600)
	if _, err := listenUnix(other, -1); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("regular file: %v", err)
	}
	if b, _ := os.ReadFile(other); string(b) != "data" {
		t.Fatal("regular file changed")
	}
}

func TestPassedFDsChecks(t *testing.T) {
	t.Setenv("LISTEN_PID", "")
	t.Setenv("LISTEN_FDS", "")
	if _, err := activationListeners(""); err == nil || !strings.Contains(err.Error(), "no sockets were passed") {
		t.Fatalf("no env: %v", err)
	}
	t.Setenv("LISTEN_PID", "1")
	t.Setenv("LISTEN_FDS", "1")
	if _, err := activationListeners(""); err == nil || !strings.Contains(err.Error(), "is not this process") {
		t.Fatalf("other pid: %v", err)
	}
	if os.Getenv("LISTEN_FDS") != "" {
		t.Fatal("LISTEN_FDS not unset")
	}
}

// activationHelper is what the test binary does when TestSocketActivation
// runs it as a child with fd 3 a listening socket, as systemd passes it:
// accept one connection and answer "ok". It returns the exit code.
func activationHelper() int {
	ls, err := activationListeners(os.Getenv("CTRD_SPEC"))
	if err != nil || len(ls) != 1 {
		fmt.Fprintf(os.Stderr, "activation listeners: %d, %v\n", len(ls), err)
		return 1
	}
	c, err := ls[0].Accept()
	if err != nil {
		fmt.Fprintln(os.Stderr, "accept:", err)
		return 1
	}
	c.Write([]byte("ok"))
	c.Close()
	return 0
}

func TestSocketActivation(t *testing.T) {
	for _, spec := range []string{"", "*", "3"} {
		t.Run("fd://"+spec, func(t *testing.T) {
			path := filepath.Join(shortTempDir(t), "a.sock")
			lis, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			ul := lis.(*net.UnixListener)
			f, _ := ul.File()
			ul.SetUnlinkOnClose(false)
			ul.Close()
			// LISTEN_PID must be the child's pid: set it in a shell that then execs.
			cmd := exec.Command("/bin/sh", "-c", `LISTEN_PID=$$ exec "$0"`, os.Args[0])
			cmd.Env = append(os.Environ(), "LISTEN_FDS=1", "CTRD_ACTIVATION_HELPER=1", "CTRD_SPEC="+spec)
			cmd.ExtraFiles = []*os.File{f}
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			f.Close()
			conn, err := net.Dial("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			b := make([]byte, 2)
			n, _ := conn.Read(b)
			conn.Close()
			if err := cmd.Wait(); err != nil || string(b[:n]) != "ok" {
				t.Fatalf("child: %v, read %q\n%s", err, b[:n], out.String())
			}
		})
	}
}
