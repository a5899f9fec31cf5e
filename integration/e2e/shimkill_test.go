package e2e

import (
	"syscall"
	"testing"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/integration/fixture"
)

// shimKillRuns is how many times TestShimKilledWhileWriting kills a shim:
// the race it covers went the wrong way about half the time, so 50 runs
// would all pass by luck about once in 2^50.
const shimKillRuns = 50

// TestShimKilledWhileWriting: an init writing to its stdout when its shim
// is SIGKILLed dies of SIGPIPE on the dead shim's pipe, often before the
// daemon looks at it; the exit is still 137, every time, as containerd 0.2
// reported it (docs/api.md 3.15), and the id can be created again at once.
// Each run reuses the id of the run before, right after its exit event.
func TestShimKilledWhileWriting(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := fixture.UniqueID(t)
	b := fixture.NewBundle(t, fixture.Args("flood"))
	evs := d.Subscribe(&types.EventsRequest{Id: id})
	for run := range shimKillRuns {
		stdout, out := fifo(t, t.TempDir(), "stdout")
		createReq(t, d, &types.CreateContainerRequest{Id: id, BundlePath: b.Path, Stdout: stdout})
		evs.Expect("start-container " + id)
		// The init is writing; once the test stops reading, the FIFO and
		// the shim's pipe fill and the init blocks in write(2), which the
		// shim's death turns into EPIPE and SIGPIPE at once.
		readUntil(t, out, "xxxx")
		pid := initPid(t, d, id)
		kill(t, shimOf(t, d, id, "init"), syscall.SIGKILL)
		if ev := evs.Next(eventWait); ev.Type != "exit" || ev.Pid != "init" || ev.Status != 137 {
			t.Fatalf("run %d of %d: got %s, want exit %s init 137", run+1, shimKillRuns, describeAll([]*types.Event{ev}), id)
		}
		waitDead(t, pid)
		out.Close()
	}
}
