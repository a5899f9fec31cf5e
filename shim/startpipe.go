package main

import (
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// startFd is where the daemon hands us the write end of the start pipe.
const startFd = 3

// startPipe reports the result of the start to the daemon: ONE JSON line,
// {"pid":N} or {"error":"..."} (with "runtime":true when runc itself
// failed, whether its message came from its log or, for a runc that logs
// none, from its stderr), then the pipe is closed. EOF without a line
// tells the daemon the shim died before the process was started. A failed
// `runc start` (process.json "start") adds "op":"start", runc's "status" and
// its combined "output".
type startPipe struct {
	f *os.File // nil when fd 3 was not given (then reports go nowhere)
}

// openStartPipe takes fd 3 and marks it close-on-exec, so neither runc nor
// the container inherits it and keeps the daemon from seeing EOF.
func openStartPipe() *startPipe {
	if _, err := unix.FcntlInt(startFd, unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		return &startPipe{}
	}
	return &startPipe{f: os.NewFile(startFd, "start-pipe")}
}

func (p *startPipe) started(pid int) {
	p.send(strconv.AppendInt([]byte(`{"pid":`), int64(pid), 10))
}

func (p *startPipe) fail(err error) {
	line := appendJSONString([]byte(`{"error":`), err.Error())
	var re *runcError
	var se *startError
	switch {
	case errors.As(err, &se):
		line = append(line, `,"op":"start","status":`...)
		line = strconv.AppendInt(line, int64(se.status), 10)
		line = appendJSONString(append(line, `,"output":`...), se.output)
	case errors.As(err, &re):
		line = append(line, `,"runtime":true`...)
	}
	p.send(line)
}

// send writes the line (a daemon gone meanwhile gives EPIPE, not a signal:
// it is not fd 1 or 2) and closes the pipe.
func (p *startPipe) send(line []byte) {
	if p.f == nil {
		return
	}
	p.f.Write(append(line, "}\n"...))
	p.f.Close()
	p.f = nil
}
