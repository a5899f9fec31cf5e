package runtime

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	gorunc "github.com/containerd/go-runc"
)

func threadCount(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads line in /proc/self/status")
	return 0
}

// TestRuncWaitsParkGoroutines: the daemon's go-runc monitor reports runc's
// exit status as go-runc's own does, and its waits park goroutines on the
// netpoller instead of holding a thread (and its P) each in waitid.
func TestRuncWaitsParkGoroutines(t *testing.T) {
	if _, ok := gorunc.Monitor.(netpollMonitor); !ok {
		t.Fatalf("go-runc's monitor is %T, want netpollMonitor", gorunc.Monitor)
	}
	m := netpollMonitor{}
	for _, want := range []int{0, 3} {
		ec, err := m.Start(exec.Command("/bin/sh", "-c", "exit "+strconv.Itoa(want)))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := m.Wait(nil, ec); err != nil || got != want {
			t.Fatalf("status %d, %v; want %d", got, err, want)
		}
	}

	const n = 50
	before := threadCount(t)
	var ecs []chan gorunc.Exit
	for range n {
		ec, err := m.Start(exec.Command("sleep", "0.3"))
		if err != nil {
			t.Fatal(err)
		}
		ecs = append(ecs, ec)
	}
	// While all of them wait, the thread count must not follow the number
	// of waits.
	most := 0
	for deadline := time.Now().Add(200 * time.Millisecond); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		most = max(most, threadCount(t))
	}
	for _, ec := range ecs {
		m.Wait(nil, ec)
	}
	if most-before >= n/2 {
		t.Fatalf("%d waits raised the thread count from %d to %d: waits hold threads", n, before, most)
	}
}
