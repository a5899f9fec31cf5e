package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Control message types: text lines "<type> <width> <height>\n" on the
// control FIFO; for ctlReopenLog "2 <token> 0\n".
const (
	ctlCloseStdin = 0 // width and height are ignored
	ctlResize     = 1 // resize the pty to width×height
	ctlReopenLog  = 2 // reopen the CRI log; answer token in logReopenFile
)

type controlMsg struct {
	kind          int
	width, height uint16
	token         uint64 // ctlReopenLog only
}

// parseControl parses one control line; ok is false for a malformed one.
func parseControl(line string) (msg controlMsg, ok bool) {
	f := strings.Fields(line)
	if len(f) != 3 {
		return controlMsg{}, false
	}
	kind, err := strconv.Atoi(f[0])
	if err != nil {
		return controlMsg{}, false
	}
	if kind == ctlReopenLog {
		token, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return controlMsg{}, false
		}
		return controlMsg{kind: kind, token: token}, true
	}
	w, err1 := strconv.ParseUint(f[1], 10, 16)
	h, err2 := strconv.ParseUint(f[2], 10, 16)
	if err1 != nil || err2 != nil {
		return controlMsg{}, false
	}
	return controlMsg{kind: kind, width: uint16(w), height: uint16(h)}, true
}

// controller is what the control FIFO acts on.
type controller interface {
	closeStdin()
	resize(width, height uint16)
	reopenLog(token uint64)
}

// openControl opens the control FIFO read-write: the open does not wait for
// the daemon, and reads never see EOF when the daemon closes its end (a new
// daemon reopens it after a restart).
func openControl(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, wrap("open control fifo", err)
	}
	return f, nil
}

// serveControl applies control lines to c until reading f fails. Malformed
// lines, over-long ones and unknown types are skipped.
func serveControl(f *os.File, c controller, log *logger) {
	r := bufio.NewReaderSize(f, 256)
	skipping := false // inside a line longer than the buffer
	for {
		line, err := r.ReadSlice('\n')
		switch {
		case err == bufio.ErrBufferFull:
			skipping = true
		case err != nil:
			log.warn("control fifo: " + err.Error() + "; control messages are no longer read")
			return
		case skipping:
			skipping = false
		default:
			apply(c, string(line))
		}
	}
}

func apply(c controller, line string) {
	msg, ok := parseControl(line)
	if !ok {
		return
	}
	switch msg.kind {
	case ctlCloseStdin:
		c.closeStdin()
	case ctlResize:
		c.resize(msg.width, msg.height)
	case ctlReopenLog:
		c.reopenLog(msg.token)
	}
}
