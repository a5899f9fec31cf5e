package main

import (
	"os"
	"time"
)

// logger writes the shim's own errors and warnings to shim-log.json, one
// JSON object per line: {"level":"error","msg":"...","time":"..."}. The
// shim's stdio is /dev/null, so this file is the only place they can go.
type logger struct {
	f *os.File // nil when the log cannot be opened: entries are dropped
}

func openLog(path string) *logger {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return &logger{}
	}
	return &logger{f: f}
}

func (l *logger) error(msg string) { l.write("error", msg) }

func (l *logger) warn(msg string) { l.write("warning", msg) }

// write appends one entry in a single write, so entries never interleave.
func (l *logger) write(level, msg string) {
	if l.f == nil {
		return
	}
	b := append([]byte(`{"level":`), appendJSONString(nil, level)...)
	b = appendJSONString(append(b, `,"msg":`...), msg)
	b = appendJSONString(append(b, `,"time":`...), time.Now().UTC().Format(time.RFC3339Nano))
	l.f.Write(append(b, "}\n"...))
}
