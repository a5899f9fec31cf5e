package objects

import (
	"time"

	"github.com/evjournal/containerd/supervisor/journal"
)

// Apply replays one journaled event into the table, as the loop applied it
// when it happened; events of ids that are no object, and events replayed
// over a later state, change nothing. It reports whether the table changed.
//
// Only what the journal says is applied here: the pid of a started object
// is unknown to the journal and filled in by the restore (the loop adopts
// the running container).
func (t *Table) Apply(ev journal.Event) bool {
	switch ev.Type {
	case journal.TypeCRICreated:
		return t.applyCreated(ev)
	case journal.TypeStartContainer:
		return t.Started(ev.ID, ev.Incarnation, 0, ev.Timestamp)
	case journal.TypeCRIStartFailed:
		msg := ""
		if ev.CRI != nil {
			msg = ev.CRI.Message
		}
		return t.StartFailed(ev.ID, msg, ev.Timestamp)
	case journal.TypeExit:
		if ev.Pid != "init" {
			return false
		}
		return t.Exit(ev.ID, ev.Incarnation, ev.Status, exitTime(ev), "")
	case journal.TypeOOM:
		return t.OOM(ev.ID, ev.Incarnation)
	case journal.TypeCRIDeleted:
		return t.Remove(ev.ID)
	}
	return false
}

// applyCreated adds the object a cri-created names, unless it is known.
// One written by an older daemon carries no CRI part: it is left to the
// CRI service's import of its records.
func (t *Table) applyCreated(ev journal.Event) bool {
	if ev.CRI == nil {
		return false
	}
	if o, ok := t.objs[ev.ID]; ok {
		if o.State != Reserved {
			return false
		}
		t.forget(o) // reserved before a restart: cannot be, but the event wins
	}
	o := Object{ID: ev.ID, Kind: Kind(ev.CRI.Kind), SandboxID: ev.CRI.Sandbox, Name: ev.CRI.Name,
		State: Created, CreatedAt: ev.Timestamp.UnixNano()}
	if t.put(o) != nil {
		return false
	}
	t.dirty = true
	return true
}

// CreatedEvent is the journal event of a Commit.
func CreatedEvent(o Object) journal.Event {
	return journal.Event{Type: journal.TypeCRICreated, ID: o.ID,
		CRI: &journal.CRIObject{Kind: string(o.Kind), Sandbox: o.SandboxID, Name: o.Name}}
}

// StartFailedEvent is the journal event of a StartFailed.
func StartFailedEvent(id, message string) journal.Event {
	return journal.Event{Type: journal.TypeCRIStartFailed, ID: id, Status: 128, CRI: &journal.CRIObject{Message: message}}
}

func exitTime(ev journal.Event) time.Time {
	if !ev.ExitedAt.IsZero() {
		return ev.ExitedAt
	}
	return ev.Timestamp
}
