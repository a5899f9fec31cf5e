package supervisor

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/supervisor/objects"
)

// restoreTimeout bounds the load of one container: one hung container must
// not stop the others.
const restoreTimeout = 10 * time.Second

// restore adopts every container found in the state dir, before any request
// is served. Live processes are monitored again; dead ones get their exit
// replayed (execs first, init last) unless it was already published. An
// exit counts as published when its journal record (matched by container
// id, process id and incarnation) or its exit-published marker exists, and
// every step that follows is idempotent, so a crash at any point of restore
// neither loses nor repeats an exit.
func (s *Supervisor) restore(ctx context.Context) error {
	ids, err := s.rt.ListIDs(s.cfg.StateDir)
	if err != nil {
		return fmt.Errorf("list state dir: %w", err)
	}
	// List the retired containers before adopting anything: adopting
	// queues exits whose handling retires containers, and one retired
	// meanwhile must not be adopted a second time from .retired.
	retired, err := s.rt.Retired(s.cfg.StateDir)
	if err != nil {
		s.log.WithError(err).Warn("listing retired containers")
	}
	loads := s.loadAll(ctx, ids)
	facts := s.readJournalFacts(wanted(loads, retired))
	aside := 0
	for _, l := range loads {
		if l.err != nil && ctx.Err() != nil {
			continue // cut short by Stop: left in place for the next start
		}
		if l.timedOut {
			s.leaveHungLoad(l)
			continue
		}
		if l.err != nil {
			l.c, l.err = s.recoverContainer(l.id, l.err, facts)
		}
		if l.err != nil {
			s.setAside(l.id, l.err)
			aside++
			continue
		}
		if !s.startKnown(l.c, facts) {
			s.abandonCreate(l.c)
			continue
		}
		s.adopt(l.c, facts)
	}
	present := map[string]bool{}
	for _, id := range ids {
		present[id] = true
	}
	for _, c := range retired {
		s.adoptRetired(c, facts.exits)
		present[c.ID()] = true
	}
	s.exitLostContainers(present)
	s.log.WithFields(map[string]interface{}{
		"containers": len(ids), "adopted": len(s.containers), "exits_to_replay": s.pendingExits(),
		"retired": len(retired), "set_aside": aside, "journal_events": s.journal.Len(),
	}).Info("restore: state dir loaded")
	s.pruneAside()
	s.cleanRuncOrphans()
	s.m.containers.Update(int64(len(s.containers)))
	return nil
}

// procKey names one process of one container incarnation.
func procKey(id, pid, incarnation string) string { return id + "\x00" + pid + "\x00" + incarnation }

type loaded struct {
	id       string
	c        Container
	err      error
	timedOut bool
}

// loadAll loads the containers in parallel, each bounded by restoreTimeout.
// Load makes no runc call, so this is file reads and /proc lookups only.
func (s *Supervisor) loadAll(ctx context.Context, ids []string) []loaded {
	out := make([]loaded, len(ids))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i] = s.loadOne(ctx, id)
		}()
	}
	wg.Wait()
	return out
}

func (s *Supervisor) loadOne(ctx context.Context, id string) loaded {
	ch := make(chan loaded, 1)
	go func() {
		c, err := s.rt.Load(s.cfg.StateDir, id)
		ch <- loaded{id: id, c: c, err: err}
	}()
	select {
	case l := <-ch:
		return l
	case <-time.After(restoreTimeout):
	case <-ctx.Done():
	}
	// The load is left to finish on its own; what it opened is closed
	// then, and its dir stays in place (not set aside) for the next start.
	go func() {
		if l := <-ch; l.c != nil {
			for _, p := range l.c.Processes() {
				p.Close()
			}
		}
	}()
	return loaded{id: id, timedOut: true, err: fmt.Errorf("loading took over %s", restoreTimeout)}
}

// leaveHungLoad leaves a container whose load timed out where it is: its
// state may be whole (a stuck file system, say), so it is neither set aside
// nor recovered; the next start loads it again. Meanwhile it is not
// supervised, which the log says.
func (s *Supervisor) leaveHungLoad(l loaded) {
	s.log.WithField("container", l.id).WithError(l.err).Error("restore: container not adopted now; its state is " +
		"left in place and loaded again at the next start (its processes run on, unsupervised until then)")
}

// recoverContainer rebuilds a container that Load could not read (its
// state.json is damaged) from what survives: a live container is never
// dropped for a damaged record.
func (s *Supervisor) recoverContainer(id string, cause error, facts journalFacts) (Container, error) {
	s.log.WithField("container", id).WithError(cause).Warn("restore: container state unreadable; recovering it from what survives")
	c, err := s.rt.Recover(s.cfg.StateDir, id, runtime.RecoverHint{Runtime: s.cfg.Runtime, RuntimeArgs: s.cfg.RuntimeArgs,
		Shim: s.cfg.Shim, Incarnation: facts.incarnations[id]})
	if err != nil {
		return nil, fmt.Errorf("%w; recovery failed too: %v", cause, err)
	}
	return c, nil
}

// startKnown reports whether a container's start was (or may have been)
// acknowledged: its started marker, or its start-container record. Without
// either, the start counts as interrupted only if the journal still holds
// every event since the container was made; when older events were
// compacted away, its start may have been among them and the container is
// kept (never drop a live, acknowledged container).
func (s *Supervisor) startKnown(c Container, facts journalFacts) bool {
	if c.Records().Started("init") || facts.starts[procKey(c.ID(), "init", c.Incarnation())] {
		return true
	}
	if o, ok := s.objects.Get(c.ID()); ok && o.Incarnation == c.Incarnation() && o.State != objects.Created {
		return true // the CRI objects' checkpoint saw it started (a lost journal)
	}
	if !facts.oldest.IsZero() && facts.oldest.After(c.Created()) {
		s.log.WithField("container", c.ID()).Warn("restore: no started marker, and the journal no longer reaches back to the " +
			"container's creation: its start may have been compacted away; adopted")
		s.enqueue(c.ID(), step{name: "mark-started", retry: true, work: func(context.Context) error { return c.Records().MarkStarted("init") }})
		return true
	}
	return false
}

// setAside moves an unloadable state dir out of the way with its reason;
// nothing is deleted, so a person can look at it.
func (s *Supervisor) setAside(id string, cause error) {
	s.m.setAside.Inc(1)
	log := s.log.WithField("container", id).WithError(cause)
	if err := s.rt.SetAside(s.cfg.StateDir, id, cause.Error()); err != nil {
		log.WithField("aside_error", err).Error("container state cannot be loaded nor set aside; left in place")
		return
	}
	log.Errorf("container state cannot be loaded; set aside under .aside/ for inspection (the newest %s are kept)", s.asideKept())
}

// DefaultAsideKeep is how many set-aside state dirs restore keeps by
// default: the last few crashes' worth to inspect, bounded so that a daemon
// killed again and again while deleting containers (each time one more
// half-deleted dir is set aside) cannot fill the state dir's tmpfs.
const DefaultAsideKeep = 50

// pruneAside removes the oldest set-aside dirs beyond cfg.AsideKeep, once
// restore has set aside what it could not load, and logs what it removed.
func (s *Supervisor) pruneAside() {
	if s.cfg.AsideKeep < 0 {
		return
	}
	removed, err := s.rt.PruneAside(s.cfg.StateDir, s.cfg.AsideKeep)
	if len(removed) > 0 {
		s.log.WithField("removed", strings.Join(removed, " ")).Warnf("restore: removed the %d oldest set-aside state dirs "+
			"from .aside/; the newest %s are kept", len(removed), s.asideKept())
	}
	if err != nil {
		s.log.WithError(err).Warn("restore: cannot prune .aside/; set-aside state dirs left in place")
	}
}

// asideKept says how many set-aside dirs are kept, for the log.
func (s *Supervisor) asideKept() string {
	if s.cfg.AsideKeep < 0 {
		return "all"
	}
	return strconv.Itoa(s.cfg.AsideKeep)
}

// abandonCreate removes a container whose create a crash interrupted: its
// start was never published, so no client knows it and no event is due.
func (s *Supervisor) abandonCreate(c Container) {
	s.log.WithField("container", c.ID()).Warn("restore: removing a container whose start was interrupted by a crash")
	for _, p := range c.Processes() {
		p.Close()
	}
	st := s.cleanupStep("abandon-create", c)
	st.work = c.DeleteAbandoned // its shim may still be inside runc create
	s.enqueue(c.ID(), st)
}

// abandonExec removes an exec whose start a crash interrupted: no client
// was told of it, so it gets no exit event; it is killed if it runs.
func (s *Supervisor) abandonExec(c Container, p Process) {
	s.log.WithField("container", c.ID()).WithField("pid", p.ID()).
		Warn("restore: removing an exec whose start was interrupted by a crash")
	if p.State() != runtime.Stopped {
		p.Signal(syscall.SIGKILL)
	}
	s.enqueue(c.ID(), step{name: "abandon-exec", retry: true, work: func(context.Context) error {
		// Let its shim finish (it writes exitStatus into the dir) first.
		if fd := p.ExitFD(); fd >= 0 {
			runtime.WaitHangup(fd, 10*time.Second)
		}
		p.Close()
		return c.RemoveProcess(p.ID())
	}})
}

// adopt puts a loaded container back under the loop's care.
func (s *Supervisor) adopt(c Container, facts journalFacts) {
	e := newEntry(c.ID())
	e.c, e.status = c, StatusRunning
	var dead []Process
	for _, p := range c.Processes() {
		if p.ID() != "init" && !c.Records().Started(p.ID()) && !facts.starts[procKey(c.ID(), p.ID(), c.Incarnation())] {
			s.abandonExec(c, p)
			continue
		}
		if p.ID() == "init" {
			e.init = p
		} else {
			e.execs[p.ID()] = p
		}
		s.procs[p] = e
		if p.State() == runtime.Stopped {
			dead = append(dead, p)
		} else {
			s.watchRestored(e, p)
		}
	}
	if e.init == nil {
		s.setAsideEntry(e, fmt.Errorf("container has no init process"))
		return
	}
	s.containers[e.id] = e
	s.m.restoreContainer.Inc(1)
	if e.init.State() != runtime.Stopped {
		s.watchOOM(c)
		if c.Paused() { // a restart must not report a frozen container running
			e.status = StatusPaused
		}
	}
	s.replayDead(e, dead, facts.exits)
}

func (s *Supervisor) setAsideEntry(e *entry, cause error) {
	for _, p := range e.execs {
		delete(s.procs, p)
		p.Close()
	}
	s.setAside(e.id, cause)
}

// replayDead handles the dead processes of a restored container, execs
// before init (the order clients expect).
func (s *Supervisor) replayDead(e *entry, dead []Process, published map[string]bool) {
	sort.SliceStable(dead, func(i, j int) bool { return dead[j] == e.init && dead[i] != e.init })
	for _, p := range dead {
		if e.c.Records().ExitPublished(p.ID()) || published[procKey(e.id, p.ID(), e.c.Incarnation())] {
			s.finishPublished(e, p)
			continue
		}
		s.onExit(p)
	}
}

// finishPublished completes the cleanup of a process whose exit was already
// published before a crash: no second event.
func (s *Supervisor) finishPublished(e *entry, p Process) {
	e.exiting[p] = true
	delete(s.procs, p)
	if p != e.init {
		delete(e.execs, p.ID())
		s.enqueue(e.id, step{name: "remove-exec", retry: true, work: func(context.Context) error {
			e.c.Records().MarkExitPublished(p.ID())
			p.Close()
			return e.c.RemoveProcess(p.ID())
		}})
		return
	}
	e.removed = true
	if s.containers[e.id] == e {
		delete(s.containers, e.id)
	}
	s.enqueue(e.id, step{name: "retire", kind: barrierStep, retry: true, work: func(context.Context) error { return e.c.Retire() }})
	s.enqueue(e.id, s.deleteStep(e))
}

// adoptRetired finishes a container whose init exit was being handled when
// the daemon stopped: publish what was not yet published, then delete.
func (s *Supervisor) adoptRetired(c Container, published map[string]bool) {
	e := newEntry(c.ID())
	e.c, e.status, e.removed = c, StatusStopped, true
	var dead []Process
	for _, p := range c.Processes() {
		if p.ID() == "init" {
			e.init = p
		} else {
			e.execs[p.ID()] = p
		}
		s.procs[p] = e
		// An exec may outlive its retired init (a host-pid exec): it is
		// watched like any live process, and killed once the init's exit
		// is handled (killExecs); its real exit comes through the monitor.
		// Marking it dead would make up a status for a running process.
		if p.ID() != "init" && p.State() != runtime.Stopped {
			s.watchRestored(e, p)
			continue
		}
		dead = append(dead, p)
	}
	if e.init == nil {
		s.enqueue(e.id, step{name: "delete", kind: barrierStep, retry: true, work: c.Delete})
		return
	}
	s.replayDead(e, dead, published)
}

// watchRestored puts a live restored process in the monitor. One whose exit
// FIFO could not be reopened (damaged: the runtime warned already) has no fd
// to watch: the reconcile pass, which also checks the shim itself, finds its
// exit.
func (s *Supervisor) watchRestored(e *entry, p Process) {
	if p.ExitFD() < 0 {
		s.log.WithField("container", e.id).WithField("pid", p.ID()).
			Info("restored process without an exit FIFO: its exit is found by the reconcile pass")
		return
	}
	if err := s.mon.Monitor(p); err != nil {
		s.log.WithError(err).WithField("container", e.id).Error("cannot monitor restored process; the reconcile pass finds its exit")
	}
}

// pendingExits counts the processes whose exit restore has queued.
func (s *Supervisor) pendingExits() int {
	n := 0
	for p, e := range s.procs {
		if e.exiting[p] {
			n++
		}
	}
	return n
}
