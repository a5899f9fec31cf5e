package supervisor

// job is slow work (runc, shim, file system) run off the loop. Its result, if
// it changes state, comes back into the loop as a task.
type job func()

// workerPool runs jobs on a fixed number of goroutines. Submit never blocks
// the loop: jobs that find every worker busy wait in a backlog owned by the
// loop, which feeds them as workers free up.
type workerPool struct {
	jobs    chan job
	backlog []job // owned by the loop
	done    chan struct{}
	freed   chan struct{} // a worker finished a job: the loop may refill
}

func newWorkerPool(n int) *workerPool {
	p := &workerPool{jobs: make(chan job), done: make(chan struct{}), freed: make(chan struct{}, n)}
	for i := 0; i < n; i++ {
		go p.work()
	}
	return p
}

func (p *workerPool) work() {
	for {
		select {
		case j := <-p.jobs:
			j()
			select {
			case p.freed <- struct{}{}:
			default:
			}
		case <-p.done:
			return
		}
	}
}

// submit hands j to an idle worker or queues it. Called by the loop only.
func (p *workerPool) submit(j job) {
	if len(p.backlog) == 0 {
		select {
		case p.jobs <- j:
			return
		default:
		}
	}
	p.backlog = append(p.backlog, j)
}

// refill moves backlog jobs to idle workers without blocking. Called by the loop.
func (p *workerPool) refill() {
	for len(p.backlog) > 0 {
		select {
		case p.jobs <- p.backlog[0]:
			p.backlog[0] = nil
			p.backlog = p.backlog[1:]
		default:
			return
		}
	}
}

func (p *workerPool) stop() { close(p.done) }
