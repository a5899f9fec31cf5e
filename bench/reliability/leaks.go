package reliability

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/bench/internal/harness"
)

// usage is what must stay flat over create/delete cycles.
type usage struct {
	fds, goroutines, threads int
	rssKiB                   int64
	zombies, stateEntries    int
	runcEntries, shims       int
}

func measure(env *harness.Env, d *harness.Daemon) (usage, error) {
	var u usage
	var err error
	pid := d.Pid()
	if u.fds, err = harness.FDCount(pid); err != nil {
		return u, err
	}
	if u.goroutines, err = d.Goroutines(); err != nil {
		return u, err
	}
	th, err := harness.StatusField(pid, "Threads")
	if err != nil {
		return u, err
	}
	u.threads = int(th)
	if u.rssKiB, err = harness.StatusField(pid, "VmRSS"); err != nil {
		return u, err
	}
	u.zombies = len(harness.ZombieChildren(pid))
	u.stateEntries = countEntries(d.StateDir)
	u.runcEntries = len(d.Runc().IDs())
	u.shims = len(env.Shims(d.StateDir))
	return u, nil
}

// countEntries counts the files and dirs under dir, recursively.
func countEntries(dir string) int {
	n := 0
	filepath.Walk(dir, func(string, os.FileInfo, error) error { n++; return nil })
	return n
}

// leaks runs LeakCycles create → SIGKILL → exit-event cycles, LeakParallel
// at a time, and compares the daemon's fds, goroutines (pprof), threads,
// RSS and zombie children, the state dir and the runc root before and after.
func (s *Suite) leaks() error {
	d, bundle, err := s.startWithBundle("leaks-sleep", "leaks")
	if err != nil {
		return err
	}
	ctx := context.Background()
	sub, err := harness.Subscribe(ctx, d.Client, &types.EventsRequest{}, 1<<16)
	if err != nil {
		return err
	}
	defer sub.Close()
	w := newExitWaiter(sub)
	cycle := func(id string) error {
		ch := w.expect(id)
		if _, err := d.Client.CreateContainer(ctx, &types.CreateContainerRequest{Id: id, BundlePath: bundle}); err != nil {
			return err
		}
		if _, err := d.Client.Signal(ctx, &types.SignalRequest{Id: id, Pid: "init", Signal: uint32(syscall.SIGKILL)}); err != nil {
			return err
		}
		select {
		case ev := <-ch:
			if ev.Status != 137 {
				return fmt.Errorf("%s exited with %d, want 137", id, ev.Status)
			}
			return nil
		case <-time.After(30 * time.Second):
			return fmt.Errorf("no exit event for %s within 30 s", id)
		}
	}
	run := func(prefix string, n int) error {
		_, err := parallel(n, s.cfg.LeakParallel, func(i int) error { return cycle(s.env.ID(fmt.Sprintf("%s-%d", prefix, i))) })
		return err
	}
	if err := run("warm", 20); err != nil {
		return err
	}
	if err := settle(s.env, d); err != nil {
		return err
	}
	before, err := measure(s.env, d)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := run("leak", s.cfg.LeakCycles); err != nil {
		return err
	}
	took := time.Since(t0)
	if err := settle(s.env, d); err != nil {
		return err
	}
	after, err := measure(s.env, d)
	if err != nil {
		return err
	}
	s.line("leak_cycles", float64(s.cfg.LeakCycles), "cycles")
	s.line("leak_cycles_per_s", float64(s.cfg.LeakCycles)/took.Seconds(), "cycles/s")
	s.line("leak_fd_delta", float64(after.fds-before.fds), "fds")
	s.line("leak_goroutine_delta", float64(after.goroutines-before.goroutines), "goroutines")
	s.line("leak_thread_delta", float64(after.threads-before.threads), "threads")
	s.line("leak_rss_delta_kib", float64(after.rssKiB-before.rssKiB), "KiB")
	s.line("leak_state_dir_entries_delta", float64(after.stateEntries-before.stateEntries), "entries")
	s.zero("leak_zombies", after.zombies, "processes")
	s.zero("leak_runc_containers_left", after.runcEntries, "containers")
	s.zero("leak_shims_left", after.shims, "processes")
	switch {
	case after.fds-before.fds > 3:
		s.failf("fds grew by %d over %d cycles", after.fds-before.fds, s.cfg.LeakCycles)
	case after.goroutines-before.goroutines > 5:
		s.failf("goroutines grew by %d over %d cycles", after.goroutines-before.goroutines, s.cfg.LeakCycles)
	case after.stateEntries > before.stateEntries:
		s.failf("state dir grew by %d entries over %d cycles", after.stateEntries-before.stateEntries, s.cfg.LeakCycles)
	}
	return nil
}

// settle waits until the daemon lists no container, its runc root is empty
// and no shim is left, then a second more for the stragglers.
func settle(env *harness.Env, d *harness.Daemon) error {
	ctx := context.Background()
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := d.Client.State(ctx, &types.StateRequest{})
		if err == nil && len(st.GetContainers()) == 0 && len(d.Runc().IDs()) == 0 && len(env.Shims(d.StateDir)) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("daemon not idle 60 s after the cycles")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
	return nil
}

// exitWaiter hands each init exit event to whoever expects it.
type exitWaiter struct {
	mu      sync.Mutex
	waiting map[string]chan *types.Event
}

func newExitWaiter(sub *harness.Stream) *exitWaiter {
	w := &exitWaiter{waiting: map[string]chan *types.Event{}}
	go func() {
		for r := range sub.C {
			if r.Ev.Type != "exit" || r.Ev.Pid != "init" {
				continue
			}
			w.mu.Lock()
			if ch, ok := w.waiting[r.Ev.Id]; ok {
				ch <- r.Ev
				delete(w.waiting, r.Ev.Id)
			}
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *exitWaiter) expect(id string) <-chan *types.Event {
	ch := make(chan *types.Event, 1)
	w.mu.Lock()
	w.waiting[id] = ch
	w.mu.Unlock()
	return ch
}

// parallel runs f(0..n-1), at most par at a time; the first error.
func parallel(n, par int, f func(i int) error) (time.Duration, error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	sem := make(chan struct{}, par)
	t0 := time.Now()
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		mu.Lock()
		stop := first != nil
		mu.Unlock()
		if stop {
			<-sem
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f(i); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return time.Since(t0), first
}
