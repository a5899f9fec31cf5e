package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evjournal/containerd/cri/crilog"
	"github.com/evjournal/containerd/integration/fixture"
)

// awaitFile reads path until it holds want (a file has nothing to block on).
func awaitFile(t *testing.T, path, want string) string {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		data, _ := os.ReadFile(path)
		if strings.Contains(string(data), want) {
			return string(data)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %q after %v, want %q in it", path, data, wait, want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func logStdout(t *testing.T, path string) string {
	t.Helper()
	data, _ := os.ReadFile(path)
	recs, err := crilog.ReadAll(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return string(crilog.Join(recs, crilog.Stdout))
}

// TestCRILogReopen: the shim writes stdout into the CRI log; a reopen-log
// control message makes it reopen the path and answer its token in
// log-reopen; the idle shim's resident memory stays within the target.
func TestCRILogReopen(t *testing.T) {
	fixture.RequireRoot(t)
	t.Parallel()
	c := newContainer(t, fixture.Args("cat", "--", "echo", "cat done"))
	defer c.remove(t)
	logPath := filepath.Join(t.TempDir(), "0.log")
	p := c.startShim(t, procOpts{stdin: true, logPath: logPath})
	p.started()
	c.mustRunc(t, "start", c.id)
	p.writeStdin("first\n")
	awaitFile(t, logPath, " stdout F first\n")
	rss := vmRSS(t, p.shimPid)
	t.Logf("idle shim VmRSS with a CRI log: %d kB (%.2f MiB)", rss, float64(rss)/1024)
	if rss > maxIdleRSS {
		t.Errorf("idle shim VmRSS %d kB, want at most %d kB", rss, maxIdleRSS)
	}
	if err := os.Rename(logPath, logPath+".1"); err != nil {
		t.Fatal(err)
	}
	p.control("2 7 0")
	awaitFile(t, p.path(logReopenFile), "7\n")
	p.writeStdin("second\n")
	p.control("0 0 0")
	if got := p.exited(); got != 0 {
		t.Fatalf("exitStatus %d, want 0", got)
	}
	if got := logStdout(t, logPath+".1"); got != "first\n" {
		t.Errorf("rotated log holds %q", got)
	}
	if got := logStdout(t, logPath); got != "second\ncat done\n" {
		t.Errorf("new log holds %q", got)
	}
}
