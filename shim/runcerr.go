package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// runcError is a failed runc command. Its text is runc's own message, verbatim
// when runc gave one, since that is what the daemon passes on to its client.
type runcError struct {
	msg string
}

func (e *runcError) Error() string { return e.msg }

// newRuncError explains a runc that ended with ws: the last error entry
// runc wrote to its JSON log after offset from, else what it wrote to its
// stderr (asked only then: it may mean waiting for the stderr copy), else
// the status itself.
func newRuncError(sub string, ws unix.WaitStatus, logPath string, from int64, stderr func() string) error {
	if msg := lastLogError(logPath, from); msg != "" {
		return &runcError{msg: msg}
	}
	if msg := strings.TrimSpace(stderr()); msg != "" {
		return &runcError{msg: msg}
	}
	return &runcError{msg: "runc " + sub + " failed with status " + strconv.Itoa(shellStatus(ws)) + " and no message"}
}

// logTailMax bounds how much of runc's log is read back.
const logTailMax = 1 << 20

// lastLogError returns the msg of the last {"level":"error"} line of the
// JSON-lines log at path written after offset from, or "".
func lastLogError(path string, from int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size()-from > logTailMax {
		from = fi.Size() - logTailMax
	}
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return ""
	}
	return lastErrorEntry(f)
}

func lastErrorEntry(r io.Reader) string {
	var msg string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), logTailMax)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		m, err := jsonObject(line)
		if err != nil {
			continue // a torn or foreign line: skip it
		}
		level, _ := jsonString(m["level"])
		if text, _ := jsonString(m["msg"]); level == "error" && text != "" {
			msg = text
		}
	}
	return msg
}

// fileSize is the size of path, 0 if it does not exist yet.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}
