package supervisor

import (
	goruntime "runtime"
	"sync"
)

// job is slow work (runc, shim, file system) run off the loop. Its result, if
// it changes state, comes back into the loop as a task.
type job func()

// workerPool runs jobs on a fixed number of goroutines. submit never blocks
// the loop: jobs wait in a queue under a mutex held only to append or pop.
type workerPool struct {
	mu      sync.Mutex
	cond    *sync.Cond
	queue   []job
	busy    int // jobs queued or running; guarded by mu
	stopped bool
	running sync.WaitGroup // jobs taken from the queue and not finished (see wait, failpoint.go)
}

func newWorkerPool(n int) *workerPool {
	p := &workerPool{}
	p.cond = sync.NewCond(&p.mu)
	for i := 0; i < n; i++ {
		go p.work()
	}
	return p
}

func (p *workerPool) work() {
	for {
		j, ok := p.next()
		if !ok {
			return
		}
		j()
		p.mu.Lock()
		p.busy--
		p.mu.Unlock()
		p.running.Done()
	}
}

func (p *workerPool) next() (job, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.queue) == 0 && !p.stopped {
		p.cond.Wait()
	}
	if p.stopped {
		return nil, false
	}
	j := p.queue[0]
	p.queue[0] = nil
	p.queue = p.queue[1:]
	p.running.Add(1) // under mu: once stopped, no job starts, so wait is safe
	return j, true
}

// submit queues j for the next idle worker.
func (p *workerPool) submit(j job) {
	p.mu.Lock()
	p.queue = append(p.queue, j)
	p.busy++
	p.mu.Unlock()
	p.cond.Signal()
}

// load is the number of jobs queued or running.
func (p *workerPool) load() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.busy
}

// stop ends the workers after their current job; queued jobs are dropped
// (what they would have done is redone by restore at the next start).
func (p *workerPool) stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.cond.Broadcast()
}

// readWorkers is the size of the read lane (State's pid scans, Stats,
// reconcile): enough to overlap two slow reads, few enough that a crowd of
// pollers cannot take every CPU from the exit lane and the loop.
const readWorkers = 2

// execWorkers is the size of the exec lane: the exec starts (runc exec
// through a shim) that run at once, across containers: twice the CPUs,
// at least 4, at most 32. An exec start is CPU work (runc, runc init, the
// shim), so more at once than the node has CPUs for only makes each
// slower: with 20 probes at once on 2 CPUs, 4 workers gave 7-18 % more
// execs a second than 16 did (the bench's cri exec step beside containerd,
// run after run), with no worse latency.
func execWorkers() int { return min(max(2*goruntime.GOMAXPROCS(0), 4), 32) }
