package main

import (
	"encoding/json"
	"fmt"
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

func (l *logger) errorf(format string, v ...any) { l.write("error", fmt.Sprintf(format, v...)) }

func (l *logger) warnf(format string, v ...any) { l.write("warning", fmt.Sprintf(format, v...)) }

// write appends one entry in a single write, so entries never interleave.
func (l *logger) write(level, msg string) {
	if l.f == nil {
		return
	}
	line, err := json.Marshal(logEntry{Level: level, Msg: msg, Time: time.Now().UTC().Format(time.RFC3339Nano)})
	if err != nil {
		return
	}
	l.f.Write(append(line, '\n'))
}

type logEntry struct {
	Level string `json:"level"`
	Msg   string `json:"msg"`
	Time  string `json:"time,omitempty"`
}
