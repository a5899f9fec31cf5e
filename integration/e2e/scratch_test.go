package e2e

import (
	"syscall"
	"testing"

	"github.com/evjournal/containerd/integration/fixture"
)

func TestScratch(t *testing.T) {
	d := startDaemon(t)
	id := fixture.UniqueID(t)
	b := fixture.NewBundle(t)
	noPidNamespace(t, b)
	evs, _ := startAndWait(t, d, id, b)
	addProcess(t, d, execReq(id, "e1", "sleep", "forever"))
	evs.Expect("start-process " + id + " e1")
	signal(t, d, id, "e1", syscall.SIGKILL)
	evs.Expect("exit " + id + " e1 137")
	addProcess(t, d, execReq(id, "e2", "sleep", "forever"))
	evs.Expect("start-process " + id + " e2")
	signal(t, d, id, "init", syscall.SIGKILL)
	evs.Expect("exit "+id+" e2 137", "exit "+id+" init 137")
	t.Log(d.Log.String())
}
