package main

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// startOutputMax bounds how much of a failed `runc start`'s output is kept
// for the daemon's error reply.
const startOutputMax = 64 << 10

// startError is a `runc start` that failed. The daemon answers it as it
// answered its own `runc start` (docs/api.md: `exit status N: "<output>"`),
// so the report carries the status and the combined output verbatim.
type startError struct {
	status int // runc's exit status; -1 when runc could not be run
	output string
}

func (e *startError) Error() string { return "runc start: " + e.output }

// startInit runs `<runtime> [runtimeArgs] start <id>` for an init we created
// and adopted, when process.json asks for it ("start"): one hand-off fewer
// on a container's start than the daemon running it after our report. No
// --log: a failed start's message is runc's combined output, as it was when
// the daemon ran it. The OOM counters are recorded first (recordOOMBaseline).
func (s *shim) startInit(pid int) error {
	if err := recordOOMBaseline(pid); err != nil {
		s.log.warn("oom baseline: " + err.Error() + " (the daemon reads the counter when it arms its OOM watch)")
	}
	r, w, err := os.Pipe()
	if err != nil {
		return wrap("runc start: output pipe", err)
	}
	defer r.Close()
	null, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		w.Close()
		return wrap("runc start", err)
	}
	out := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(r, startOutputMax))
		io.Copy(io.Discard, r) // a runc that writes more must not block on us
		out <- b
	}()
	g := runcGlobal{runtime: s.cfg.Runtime, args: s.cfg.RuntimeArgs}
	ws, err := s.runWait(g.argv([]string{"start", s.id}), [3]int{null, int(w.Fd()), int(w.Fd())})
	unix.Close(null)
	w.Close() // runc's copies are closed once it exited: the reader sees EOF
	output := <-out
	if err != nil {
		return &startError{status: -1, output: err.Error()}
	}
	if ws != 0 {
		return &startError{status: shellStatus(ws), output: string(output)}
	}
	return nil
}
