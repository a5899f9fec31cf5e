package journal

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed is returned by writes after Close.
	ErrClosed = errors.New("journal closed")
	// ErrInvalidArgument marks bad options or an event that cannot be stored.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrSeqExhausted is returned by Append once the last event has seq
	// 2^64-1: sequence numbers never wrap, so nothing more can be appended.
	ErrSeqExhausted = errors.New("sequence numbers exhausted")
)

// WriteError is what Append, AppendBatch and Commit return when the journal
// could not make events durable: a write, fsync, truncate, rename or
// directory sync failed. Err wraps the OS error, so
// errors.Is(err, syscall.ENOSPC) tells a full disk apart. By the time it is
// returned the journal is back to its last committed state and usable: the
// Discarded events appended since the last successful Commit are gone (their
// sequence numbers will be given again) and the caller may append them anew.
type WriteError struct {
	File      string // the journal file (or temp file) that failed
	Op        string // what failed: "write", "sync", "rewrite"...
	Discarded int    // events appended since the last Commit and discarded
	Err       error
}

func (e *WriteError) Error() string {
	return fmt.Sprintf("journal %s: %s: %v (%d uncommitted events discarded)", e.File, e.Op, e.Err, e.Discarded)
}

func (e *WriteError) Unwrap() error { return e.Err }
