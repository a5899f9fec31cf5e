package runtime

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evjournal/containerd/integration/fixture"
	"golang.org/x/sys/unix"
)

// idlePids are the pids of the pool's idle spares.
func (p *sparePool) idlePids() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []int
	for _, s := range p.idle {
		out = append(out, s.sp.pid)
	}
	return out
}

// waitPool waits, bounded, until cond holds of the pool's idle pids; the
// pool's fills and watches run on goroutines of their own, which tell
// nobody, hence the poll.
func waitPool(t *testing.T, p *sparePool, what string, cond func([]int) bool) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := p.idlePids()
		if cond(pids) {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: idle spares %v", what, pids)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// gone reports whether pid no longer exists (reaped: not even a zombie).
func gone(pid int) bool { return syscall.Kill(pid, 0) == syscall.ESRCH }

// TestSparePool: a refill fills the pool to sparesWanted spares,
// each `<shim> --spare` in "/" and a child of ours; a taken spare is
// replaced; an idle spare that dies is dropped from the pool and reaped
// (no zombie); DropSpares ends the idle ones.
func TestSparePool(t *testing.T) {
	fixture.RequireRoot(t)
	p := &sparePool{path: fixture.Shim(t)}
	if s := p.take(); s != nil {
		t.Fatal("a new pool gave a spare")
	}
	p.refill()
	pids := waitPool(t, p, "the fill", func(pids []int) bool { return len(pids) == sparesWanted })
	for _, pid := range pids {
		data, _ := readFileString("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if got := strings.ReplaceAll(strings.TrimRight(data, "\x00"), "\x00", " "); !strings.HasSuffix(got, "containerd-shim --spare") {
			t.Errorf("spare %d runs %q", pid, got)
		}
		if ppid, _ := parentPid(pid); ppid != unix.Getpid() {
			t.Errorf("spare %d is a child of %d, want the daemon (%d)", pid, ppid, unix.Getpid())
		}
	}
	s := p.take()
	if s == nil {
		t.Fatal("no spare taken from a full pool")
	}
	s.discard()
	p.refill()
	waitPool(t, p, "the refill after a take", func(now []int) bool { return len(now) == sparesWanted })

	victim := p.idlePids()[0]
	if err := unix.Kill(victim, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitPool(t, p, "the dead spare dropped", func(now []int) bool { return len(now) == sparesWanted-1 })
	waitPool(t, p, "the dead spare reaped", func([]int) bool { return gone(victim) })

	left := p.idlePids()
	spares.mu.Lock()
	spares.pools["test-pool"] = p
	spares.mu.Unlock()
	DropSpares()
	spares.mu.Lock()
	delete(spares.pools, "test-pool")
	spares.mu.Unlock()
	for _, pid := range left {
		waitPool(t, p, "the dropped spare's exit", func([]int) bool { return gone(pid) })
	}
}

// readFileString reads a small file.
func readFileString(path string) (string, error) {
	data, err := os.ReadFile(path)
	return string(data), err
}
