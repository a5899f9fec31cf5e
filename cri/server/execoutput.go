package server

import (
	"io"
	"sync"
)

// A command that leaves a child holding its stdout or stderr (`daemon &` in
// a probe script): ExecSync answers with the command's exit code and the
// output written until the shim stopped copying (its drain gives up once
// the output has been idle 2 s after the exit), and succeeds. containerd
// fails such a call after its own drain bound; a probe's answer is its
// command's exit status, which a child it left does not change, so this
// daemon does not fail it (docs/cri.md, Behaviour decisions;
// TestCRIBehaviourDecisions). The exec path that carries this out is
// exec.go's; whatever it becomes, it keeps that answer.

// What ExecSync holds of its commands' output. A probe's output is small;
// a command in a hostile container can write without end, and many run at
// once. Each reply is bounded, and so is what all of them hold together.
const (
	// execReplyLimit bounds stdout and stderr together in one reply:
	// kubelet's gRPC client takes messages of up to 16 MiB, and the
	// reply's framing needs a few bytes more than its two fields.
	execReplyLimit = 16<<20 - 4<<10
	// DefaultExecOutputBudget is the daemon-wide bound of ExecSync
	// output held in memory at once (--exec-sync-output-budget).
	DefaultExecOutputBudget = 64 << 20
)

// outputBudget is the daemon-wide bound of ExecSync output held: bytes are
// taken as they are kept and given back when the call has its reply.
type outputBudget struct {
	mu   sync.Mutex
	free int64 // guarded by mu
}

func newOutputBudget(size int64) *outputBudget {
	if size <= 0 {
		size = DefaultExecOutputBudget
	}
	return &outputBudget{free: size}
}

// take grants up to n bytes, as many as are free.
func (b *outputBudget) take(n int64) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	n = min(n, b.free)
	b.free -= n
	return n
}

func (b *outputBudget) give(n int64) {
	b.mu.Lock()
	b.free += n
	b.mu.Unlock()
}

// execOutput collects one ExecSync's stdout and stderr: together at most
// execReplyLimit bytes, in the order they arrive, each kept byte taken from
// the daemon's budget. What does not fit is read and dropped: the reply is
// truncated, the command never blocked on a full pipe.
type execOutput struct {
	budget *outputBudget

	mu             sync.Mutex
	room           int64  // what the reply may still hold; guarded by mu
	held           int64  // taken from the budget; guarded by mu
	stdout, stderr []byte // guarded by mu
	dropped        int64  // bytes read and not kept; guarded by mu
}

func newExecOutput(b *outputBudget) *execOutput {
	return &execOutput{budget: b, room: execReplyLimit}
}

// Stdout and Stderr are the writers of the two streams.
func (o *execOutput) Stdout() io.Writer { return streamWriter{o, &o.stdout} }
func (o *execOutput) Stderr() io.Writer { return streamWriter{o, &o.stderr} }

// streamWriter keeps what fits of each write in its stream and drops the
// rest; it never fails, so the copy from the FIFO goes on to its end.
type streamWriter struct {
	o   *execOutput
	buf *[]byte
}

func (w streamWriter) Write(p []byte) (int, error) {
	o := w.o
	o.mu.Lock()
	defer o.mu.Unlock()
	n := int64(0)
	if want := min(int64(len(p)), o.room); want > 0 {
		n = o.budget.take(want)
	}
	*w.buf = append(*w.buf, p[:n]...)
	o.room -= n
	o.held += n
	o.dropped += int64(len(p)) - n
	return len(p), nil
}

// reply is what was kept of both streams, and how many bytes were dropped.
func (o *execOutput) reply() (stdout, stderr []byte, dropped int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.stdout, o.stderr, o.dropped
}

// release gives the kept bytes back to the budget: the call has its reply.
func (o *execOutput) release() {
	o.mu.Lock()
	held := o.held
	o.held = 0
	o.mu.Unlock()
	o.budget.give(held)
}
