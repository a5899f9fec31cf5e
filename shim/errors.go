package main

// wrapError gives err some context and keeps it for errors.Is and errors.As
// (the shim avoids fmt, see json.go).
type wrapError struct {
	msg string
	err error
}

func (e *wrapError) Error() string { return e.msg + ": " + e.err.Error() }

func (e *wrapError) Unwrap() error { return e.err }

// wrap returns "msg: err".
func wrap(msg string, err error) error { return &wrapError{msg: msg, err: err} }
