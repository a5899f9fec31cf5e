package supervisor

import "github.com/evjournal/containerd/runtime"

// scheduleReconcile arms the next reconcile pass (like kubelet's relist):
// it compares the loop's view with the processes' real state and handles
// the exit of any process whose notification was missed. onExit handles a
// process once, so a pass racing with the monitor cannot duplicate an exit.
func (s *Supervisor) scheduleReconcile() {
	if s.cfg.ReconcileInterval < 0 {
		return
	}
	s.clock.AfterFunc(s.cfg.ReconcileInterval, func() {
		s.send(func(s *Supervisor) { s.reconcile() })
	})
}

// reconcile runs on the loop: it snapshots the watched processes and checks
// them on a worker, whose findings come back as exit tasks.
func (s *Supervisor) reconcile() {
	var procs []Process
	for p, e := range s.procs {
		if !e.exiting[p] {
			procs = append(procs, p)
		}
	}
	s.readLane.submit(func() {
		for _, p := range procs {
			if p.State() == runtime.Stopped {
				s.log.WithField("pid", p.ID()).Warn("reconcile found an exit the monitor did not report")
				s.send(func(s *Supervisor) { s.onExit(p) })
			}
		}
		s.send(func(s *Supervisor) { s.scheduleReconcile() })
	})
}
