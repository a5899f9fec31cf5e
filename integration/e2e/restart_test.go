package e2e

import (
	"syscall"
	"testing"
	"time"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/integration/fixture"
)

// TestRestart: processes that die while the daemon is down (an init, an
// exec) get exactly one exit each, with their real status, through a
// subscription that replays from the last event the client saw; live
// containers stay running and usable (docs/api.md section 8, items 9 and 10).
// Once after a graceful stop, once after SIGKILL.
func TestRestart(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"graceful", "sigkill"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			testRestart(t, mode)
		})
	}
}

func testRestart(t *testing.T, mode string) {
	d := startDaemon(t)
	base := fixture.UniqueID(t)
	dies, execs, lives := base+"-dies", base+"-execs", base+"-lives"
	all := d.SubscribeAfter(time.Now(), "")
	for _, id := range []string{dies, execs, lives} {
		create(t, d, id, fixture.NewBundle(t))
	}
	expectSet(t, all, "start-container "+dies, "start-container "+execs, "start-container "+lives)
	victim := addProcess(t, d, execReq(execs, "victim", "sleep", "forever"))
	all.Expect("start-process " + execs + " victim")
	keeper := addProcess(t, d, execReq(execs, "keeper", "sleep", "forever"))
	last := all.Expect("start-process " + execs + " keeper")[0]
	deadInit := initPid(t, d, dies)
	livePids := map[string]int{execs: initPid(t, d, execs), lives: initPid(t, d, lives)}

	if mode == "graceful" {
		d.Stop()
	} else {
		d.Kill()
	}
	// Behind the daemon's back: init of one container (SIGKILL: 137) and
	// one exec of another (SIGTERM; not pid 1 of the namespace: 143).
	kill(t, deadInit, syscall.SIGKILL)
	kill(t, victim, syscall.SIGTERM)
	waitDead(t, deadInit)
	waitDead(t, victim)

	restart(t, d)
	started := time.Now()
	resumed := d.SubscribeAfter(last.Timestamp.AsTime(), "")
	expectSet(t, resumed, "exit "+execs+" victim 143", "exit "+dies+" init 137")
	if took := time.Since(started); took > promptly {
		t.Errorf("the replayed exits took %s after the restart", took)
	}
	// Exactly one each: nothing else was journaled since the last event seen.
	got := storedSince(t, d, last.Timestamp, "")
	if len(got) != 2 || index(got, "exit "+execs+" victim 143") < 0 || index(got, "exit "+dies+" init 137") < 0 {
		t.Fatalf("journal after the restart: %q, want exactly the two exits", describeAll(got))
	}
	wantGone(t, d, dies)

	// The live ones are still running, with the same processes, and usable.
	for id, pid := range livePids {
		c := state(t, d, id)
		if c.Status != "running" || initPid(t, d, id) != pid || len(c.Pids) == 0 || int(c.Pids[0]) != pid {
			t.Fatalf("%s after the restart: status %s, pids %v; want running with init %d", id, c.Status, c.Pids, pid)
		}
	}
	if p := process(state(t, d, execs), "keeper"); p == nil || int(p.SystemPid) != keeper {
		t.Fatalf("exec keeper after the restart: %+v, want systemPid %d", p, keeper)
	}
	if process(state(t, d, execs), "victim") != nil {
		t.Fatal("State still lists the exec that died while the daemon was down")
	}
	for _, id := range []string{lives, execs} {
		addProcess(t, d, execReq(id, "after", "echo", "hi", "--", "exit", "4"))
		resumed.Expect("start-process "+id+" after", "exit "+id+" after 4")
	}
	for _, st := range []string{"paused", "running"} {
		if _, err := d.Client.UpdateContainer(ctxT(t), &types.UpdateContainerRequest{Id: lives, Status: st}); err != nil {
			t.Fatalf("UpdateContainer %s after the restart: %v", st, err)
		}
	}
	resumed.Expect("pause "+lives, "resume "+lives)
	signal(t, d, lives, "init", syscall.SIGKILL)
	resumed.Expect("exit " + lives + " init 137")
	signal(t, d, execs, "init", syscall.SIGKILL)
	resumed.Expect("exit "+execs+" keeper 137", "exit "+execs+" init 137")
	waitDead(t, keeper)
}

// TestShimKilled: a SIGKILLed shim gives its process's exit promptly, with
// 137 (the daemon kills the orphaned process), and the same id can be
// created again at once (docs/api.md section 8, item 11). An exec's shim
// killed does the same for the exec and leaves the container running.
func TestShimKilled(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := fixture.UniqueID(t)
	b := fixture.NewBundle(t)
	evs, _ := startAndWait(t, d, id, b)

	execPid := addProcess(t, d, execReq(id, "e1", "sleep", "forever"))
	evs.Expect("start-process " + id + " e1")
	kill(t, shimOf(t, d, id, "e1"), syscall.SIGKILL)
	start := time.Now()
	evs.Expect("exit " + id + " e1 137")
	if took := time.Since(start); took > promptly {
		t.Errorf("exec exit %s after its shim was killed", took)
	}
	waitDead(t, execPid)
	if st := state(t, d, id); st.Status != "running" || process(st, "e1") != nil {
		t.Fatalf("after the exec's shim was killed: %s, processes %v", st.Status, st.Processes)
	}

	pid := initPid(t, d, id)
	kill(t, shimOf(t, d, id, "init"), syscall.SIGKILL)
	start = time.Now()
	evs.Expect("exit " + id + " init 137")
	if took := time.Since(start); took > promptly {
		t.Errorf("init exit %s after its shim was killed", took)
	}
	waitDead(t, pid)
	wantGone(t, d, id)

	// The id again, right away.
	create(t, d, id, b)
	evs.Expect("start-container " + id)
	if st := state(t, d, id); st.Status != "running" {
		t.Fatalf("recreated container: %s", st.Status)
	}
	signal(t, d, id, "init", syscall.SIGKILL)
	evs.Expect("exit " + id + " init 137")
}

// TestOOM: a container over its 16 MiB limit gives start-container, one
// oom, then exit(init, 137), in that order (docs/api.md section 8, item 13).
func TestOOM(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := fixture.UniqueID(t)
	t0 := time.Now()
	evs := d.SubscribeAfter(t0, id)
	create(t, d, id, fixture.NewBundle(t, fixture.MemoryLimit(16<<20), fixture.Args("alloc")))
	got := evs.Expect("start-container "+id, "oom "+id, "exit "+id+" init 137")
	if ev := got[1]; ev.Pid != "" || ev.Status != 0 {
		t.Fatalf("oom event with pid %q status %d, want both empty", ev.Pid, ev.Status)
	}
	// Exactly one oom: the journal holds these three and nothing else.
	wantEvents(t, "journal of the OOM-killed container", storedSince(t, d, got[0].Timestamp, id),
		"oom "+id, "exit "+id+" init 137")
	wantGone(t, d, id)
}
