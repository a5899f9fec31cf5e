package supervisor

import (
	"context"
	"time"

	"github.com/evjournal/containerd/runtime"
	"github.com/evjournal/containerd/supervisor/journal"
)

// cleanRuncOrphans removes runc state that no container record owns any
// more (left by a crash between a container's removal and its runc
// delete). Only stopped containers whose id this daemon's journal shows it
// started are touched: a runc root may be shared with other tools, and
// their containers are never ours to delete.
func (s *Supervisor) cleanRuncOrphans() {
	s.workers.submit(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		list, err := s.rt.ListRunc(ctx, s.cfg.Runtime, s.cfg.RuntimeArgs)
		if err != nil {
			s.log.WithError(err).Warn("restore: cannot list runc state to clean up orphans")
			return
		}
		ours := s.startedIDs(list)
		s.send(func(s *Supervisor) { s.deleteOrphans(list, ours) })
	})
}

// startedIDs returns which of the stopped runc containers this daemon's
// journal shows it started. The journal is read (off the loop) only when
// there is a candidate, and only until every candidate is found.
func (s *Supervisor) startedIDs(list []runtime.RuncContainer) map[string]bool {
	candidates := map[string]bool{}
	for _, rc := range list {
		if rc.Status == "stopped" {
			candidates[rc.ID] = true
		}
	}
	ours := map[string]bool{}
	if len(candidates) == 0 {
		return ours
	}
	s.scanJournal(func(ev journal.Event) bool {
		if ev.Type == journal.TypeStartContainer && candidates[ev.ID] {
			ours[ev.ID] = true
		}
		return len(ours) < len(candidates)
	})
	return ours
}

// deleteOrphans runs on the loop, where it can tell which ids are in use.
func (s *Supervisor) deleteOrphans(list []runtime.RuncContainer, ours map[string]bool) {
	for _, rc := range list {
		_, live := s.containers[rc.ID]
		_, busy := s.queues[rc.ID]
		if live || busy || !ours[rc.ID] || rc.Status != "stopped" {
			continue
		}
		id := rc.ID
		s.log.WithField("container", id).Info("restore: removing runc state left without a container record")
		s.enqueue(id, step{name: "delete-runc-orphan", work: func(ctx context.Context) error {
			return s.rt.DeleteRunc(ctx, s.cfg.Runtime, s.cfg.RuntimeArgs, id)
		}, apply: func(err error) {
			if err != nil {
				s.log.WithError(err).WithField("container", id).Warn("restore: orphan runc state not removed")
			}
		}})
	}
}
