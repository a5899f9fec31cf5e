package server

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/containerd/errdefs"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// write copies n bytes of b to w in 32 KiB writes, as io.Copy from a FIFO
// does.
func write(w interface{ Write([]byte) (int, error) }, b byte, n int) {
	chunk := bytes.Repeat([]byte{b}, 32<<10)
	for n > 0 {
		k := min(n, len(chunk))
		w.Write(chunk[:k])
		n -= k
	}
}

// TestExecOutputReplyBound: stdout and stderr together never exceed what
// kubelet's 16 MiB messages carry; each keeps a prefix of what came, in
// the order it came, and the rest is counted as dropped.
func TestExecOutputReplyBound(t *testing.T) {
	o := newExecOutput(newOutputBudget(1 << 30))
	write(o.Stdout(), 'o', 10<<20)
	write(o.Stderr(), 'e', 10<<20)
	write(o.Stdout(), 'x', 1<<20)
	out, errOut, dropped := o.reply()
	if len(out)+len(errOut) != execReplyLimit || len(out) != 10<<20 || dropped != 21<<20-execReplyLimit {
		t.Fatalf("kept %d + %d (dropped %d), want %d in all: all of stdout, the start of stderr", len(out), len(errOut), dropped, execReplyLimit)
	}
	if bytes.Count(out, []byte{'o'}) != len(out) || bytes.Count(errOut, []byte{'e'}) != len(errOut) {
		t.Fatal("the kept bytes are not the first ones of each stream")
	}
	if execReplyLimit+4<<10 > 16<<20 {
		t.Fatalf("execReplyLimit %d leaves no room for the framing in 16 MiB", execReplyLimit)
	}
}

// TestExecOutputBudget: all calls together hold at most the budget; a call
// gets what is free, and what a finished call held is free again.
func TestExecOutputBudget(t *testing.T) {
	b := newOutputBudget(1 << 20)
	first, second := newExecOutput(b), newExecOutput(b)
	write(first.Stdout(), 'a', 800<<10)
	write(second.Stderr(), 'b', 800<<10)
	if _, e, dropped := second.reply(); len(e) != 224<<10 || dropped != 576<<10 {
		t.Fatalf("second call kept %d (dropped %d), want the 224 KiB left", len(e), dropped)
	}
	first.release()
	third := newExecOutput(b)
	write(third.Stdout(), 'c', 800<<10)
	if o, _, _ := third.reply(); len(o) != 800<<10 {
		t.Fatalf("after the first call's release a third kept %d, want 800 KiB", len(o))
	}
	second.release()
	third.release()
	if b.free != 1<<20 {
		t.Fatalf("budget %d free after every release, want all of it", b.free)
	}
}

// TestExecOutputBudgetConcurrent: many calls writing at once never take
// more than the budget, and give all of it back.
func TestExecOutputBudgetConcurrent(t *testing.T) {
	const budget = 4 << 20
	b := newOutputBudget(budget)
	var wg sync.WaitGroup
	var mu sync.Mutex
	kept := 0
	outs := make([]*execOutput, 16)
	for i := range outs {
		outs[i] = newExecOutput(b)
		wg.Add(2)
		for _, w := range []interface{ Write([]byte) (int, error) }{outs[i].Stdout(), outs[i].Stderr()} {
			go func() {
				defer wg.Done()
				write(w, 'z', 1<<20)
			}()
		}
	}
	wg.Wait()
	for _, o := range outs {
		out, e, _ := o.reply()
		mu.Lock()
		kept += len(out) + len(e)
		mu.Unlock()
	}
	if kept != budget || b.free != 0 {
		t.Fatalf("kept %d with %d free, want the whole budget %d kept", kept, b.free, budget)
	}
	for _, o := range outs {
		o.release()
	}
	if b.free != budget {
		t.Fatalf("free %d after the releases, want %d", b.free, budget)
	}
}

// TestExecSyncRacingExit: an exec whose container stopped meanwhile (the
// runtime's error is anything, "containerd-shim not installed on system"
// was seen) is FailedPrecondition, not Internal.
func TestExecSyncRacingExit(t *testing.T) {
	e := newEnv(t)
	pod := e.runPod("p")
	id := e.runCtr(pod, "c")
	e.f.set("Exec", func(string) error {
		e.loop.exitProcess(id, "init", 137)
		return errdefs.ErrInternal.WithMessage("containerd-shim not installed on system")
	})
	_, err := e.srv.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"true"}})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("ExecSync racing the exit: %v, want FailedPrecondition", err)
	}
	// A container that still runs keeps the runtime's error.
	id = e.runCtr(pod, "c2")
	e.f.set("Exec", func(string) error { return errors.New("runc broke") })
	_, err = e.srv.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"true"}})
	if status.Code(err) == codes.FailedPrecondition || !strings.Contains(err.Error(), "runc broke") {
		t.Fatalf("ExecSync failing in a running container: %v, want the runtime's error", err)
	}
}
