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
	b = appendJSONString(append(b, `,"time":`...), string(appendTime(nil, time.Now())))
	l.f.Write(append(b, "}\n"...))
}

// appendTime appends t in UTC as RFC 3339 with nanoseconds, without the
// time package's general formatter (see json.go on binary size).
func appendTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	hour, min, sec := t.Clock()
	b = appendDigits(b, year, 4)
	for _, f := range []struct {
		sep  byte
		v, n int
	}{{'-', int(month), 2}, {'-', day, 2}, {'T', hour, 2}, {':', min, 2}, {':', sec, 2}, {'.', t.Nanosecond(), 9}} {
		b = appendDigits(append(b, f.sep), f.v, f.n)
	}
	return append(b, 'Z')
}

// appendDigits appends v >= 0 in decimal, zero-padded to n digits.
func appendDigits(b []byte, v, n int) []byte {
	var buf [20]byte
	i := len(buf)
	for v > 0 || len(buf)-i < n {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
	}
	return append(b, buf[i:]...)
}
