package main

import (
	"errors"
	"io"
	"strconv"
	"time"

	"github.com/evjournal/containerd/cri/crilog"
)

// logReopenFile is the shim's answer to a reopen-log control message: one
// line "<token>\n" once the log is reopened, "<token> <error>\n" when it
// could not be (the old file stays in use). Written atomically, in our
// working directory.
const logReopenFile = "log-reopen"

// logSink is one output stream of the process (stdout or stderr) written
// into the CRI log. A failed write (a full disk) loses that output and
// nothing else: the copy goes on draining the pipe, so the process never
// blocks on it and the exit is never held; the first failure and, at the
// stream's end, how many writes failed are warnings in shim-log.json.
// Only the stream's copy goroutine uses it.
type logSink struct {
	w      *crilog.StreamWriter
	log    *logger
	failed int // writes that failed so far
}

func newLogSink(f *crilog.File, stream string, log *logger) *logSink {
	return &logSink{w: f.Stream(stream, crilog.DefaultMaxLine), log: log}
}

// Write never fails: see logSink. A read that ends mid-line (a prompt,
// `echo -n`, a process that pauses between the parts of a line) is written
// at once as a P record rather than held until its newline: whoever follows
// the log (an attached client, `kubectl logs -f`) sees the output when the
// process wrote it.
func (k *logSink) Write(p []byte) (int, error) {
	_, err := k.w.Write(p)
	k.note(err)
	if len(p) > 0 && p[len(p)-1] != '\n' {
		k.note(k.w.Flush())
	}
	return len(p), nil
}

// close writes the stream's unfinished last line, as a P record.
func (k *logSink) close() {
	k.note(k.w.Close())
	if k.failed > 1 {
		k.log.warn("cri log: " + strconv.Itoa(k.failed) + " writes failed in all; their output is lost")
	}
}

func (k *logSink) note(err error) {
	if err == nil {
		return
	}
	k.failed++
	if k.failed == 1 {
		k.log.warn("cri log: " + err.Error() + "; the output that cannot be written is dropped")
	}
}

// openCRILog opens the process's CRI log, refusing what openLogFile
// refuses, now and at every reopen.
func (s *stdio) openCRILog(path string) error {
	f, err := crilog.OpenWith(path, openLogFile)
	if err != nil {
		return err
	}
	s.crilog = f
	return nil
}

// pipeLog makes the pipe for fd (1 or 2) and copies it into the CRI log as
// the stream of that fd. As in pipeOut, the stderr copy also records runc's
// message.
func (s *stdio) pipeLog(fd int, cfg *processConfig) error {
	child, r, err := newPipe(true, cfg)
	if err != nil {
		return err
	}
	s.child[fd] = child
	stream := crilog.Stdout
	if fd == 2 {
		stream = crilog.Stderr
	}
	c := s.logCopier(r, stream)
	if fd == 2 {
		c.tee = &s.runcStderr
		s.stderrCopy = c
	}
	s.outputs = append(s.outputs, c.start())
	return nil
}

// logCopier copies src into the CRI log as stream; when src ends, the
// stream's unfinished line is written.
func (s *stdio) logCopier(src io.Reader, stream string) *copier {
	sink := newLogSink(s.crilog, stream, s.log)
	c := &copier{src: src, dst: sink, keep: true, last: &s.last, end: sink.close, deep: true}
	if d, ok := src.(deadliner); ok {
		c.stop = d
	}
	return c
}

// reopenLog reopens the CRI log at its path (kubelet renamed it to rotate
// it) and answers in logReopenFile with token.
func (s *stdio) reopenLog(token uint64) {
	err := errors.New("the process has no log path")
	if s.crilog != nil {
		err = s.crilog.Reopen()
	}
	answer := strconv.FormatUint(token, 10)
	if err != nil {
		s.log.warn("reopen log: " + err.Error() + " (the old file stays in use)")
		answer += " " + err.Error()
	}
	if werr := writeFileAtomic(".", logReopenFile, []byte(answer+"\n")); werr != nil {
		s.log.warn("reopen log: answer: " + werr.Error())
	}
}

// flushStopTimeout bounds the wait for the log copies to write their last
// unfinished lines once the drain stopped waiting for them.
const flushStopTimeout = 100 * time.Millisecond
