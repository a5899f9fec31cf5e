package supervisor

import (
	"context"
	"time"

	"github.com/evjournal/containerd/runtime"
)

// cleanRuncOrphans removes runc state that no container record owns any
// more (left by a crash between a container's removal and its runc
// delete). Only stopped containers whose id this daemon's journal shows it
// started are touched: a runc root may be shared with other tools, and
// their containers are never ours to delete.
func (s *Supervisor) cleanRuncOrphans(ours map[string]bool) {
	s.workers.submit(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		list, err := s.rt.ListRunc(ctx, s.cfg.Runtime, s.cfg.RuntimeArgs)
		if err != nil {
			s.log.WithError(err).Warn("restore: cannot list runc state to clean up orphans")
			return
		}
		s.send(func(s *Supervisor) { s.deleteOrphans(list, ours) })
	})
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
