package supervisor

import "time"

// Clock is the supervisor's source of time and timers. Tests inject a fake so
// that backoff and reconcile run without sleeping.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f once after d, on its own goroutine; the returned
	// func cancels it.
	AfterFunc(d time.Duration, f func()) (stop func())
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) func() {
	t := time.AfterFunc(d, f)
	return func() { t.Stop() }
}
