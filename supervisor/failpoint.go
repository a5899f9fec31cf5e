//go:build failpoints

package supervisor

import "github.com/evjournal/containerd/supervisor/journal"

// testJournalOptions, when a test sets it, changes the journal's options
// before New opens it (journal.WithSyncFault, say). Tests only.
var testJournalOptions func(journal.Options) journal.Options

func adjustJournalOptions(o journal.Options) journal.Options {
	if testJournalOptions != nil {
		return testJournalOptions(o)
	}
	return o
}

// crashPoint, in tests built with -tags failpoints, freezes all work once a
// given number of events were journaled, as if the daemon died right then:
// no further step starts (steps already running finish). The daemon is built
// without the tag and gets the empty one of failpoint_off.go.
type crashPoint struct {
	after     int // freeze after this many events (0 = never)
	appended  int // events journaled by this supervisor
	crashed   bool
	crashedCh chan struct{} // closed when crashed is set
}

// crashAfter arms the failpoint; call it between New and Start.
func (c *crashPoint) crashAfter(n int) {
	c.after, c.crashedCh = n, make(chan struct{})
}

// afterAppend counts one journaled event; called on the loop only.
func (c *crashPoint) afterAppend() {
	c.appended++
	if c.after > 0 && c.appended >= c.after && !c.crashed {
		c.crashed = true
		close(c.crashedCh)
	}
}

// frozen reports whether the crash point was reached; no step starts then.
func (c *crashPoint) frozen() bool { return c.crashed }

// wait returns once the jobs running at stop have finished. The crash tests
// use it to stand for a dead daemon: a real crash leaves no job running.
func (p *workerPool) wait() { p.running.Wait() }

// waitWorkers waits for the jobs of every lane (see workerPool.wait).
func (s *Supervisor) waitWorkers() {
	s.workers.wait()
	for _, p := range s.exitLane {
		p.wait()
	}
	s.execLane.wait()
	s.readLane.wait()
}
