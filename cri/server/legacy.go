package server

import (
	"github.com/evjournal/containerd/supervisor/objects"
)

// Daemons before the loop owned the CRI objects kept their lifecycle in the
// records. A record found with such a state and no object in the loop is
// imported once (Start): the loop then owns it, and the fields are never
// written again.

// legacyLifecycle is the lifecycle part of an old container record.
type legacyLifecycle struct {
	State       string `json:"state,omitempty"`
	StartedAt   int64  `json:"startedAt,omitempty"`
	FinishedAt  int64  `json:"finishedAt,omitempty"`
	ExitCode    int32  `json:"exitCode,omitempty"`
	Reason      string `json:"reason,omitempty"`
	Message     string `json:"message,omitempty"`
	Incarnation string `json:"incarnation,omitempty"`
	OOMKilled   bool   `json:"oomKilled,omitempty"`
}

// Old record states.
const (
	legacyCreated = "created"
	legacyRunning = "running"
	legacyExited  = "exited"
	legacyReady   = "ready"
)

// legacySandboxObject is the object an old sandbox record describes.
func legacySandboxObject(sb *sandbox) (objects.Object, bool) {
	if sb.rec.State == "" {
		return objects.Object{}, false
	}
	o := objects.Object{ID: sb.rec.ID, Kind: objects.Sandbox, Name: sandboxName(sb.cfg.GetMetadata()),
		State: objects.Exited, CreatedAt: sb.rec.CreatedAt, Reason: "Completed"}
	if sb.rec.State == legacyReady {
		o.State, o.Reason, o.StartedAt = objects.Running, "", sb.rec.CreatedAt
	}
	return o, true
}

// legacyContainerObject is the object an old container record describes.
func legacyContainerObject(c *container) (objects.Object, bool) {
	l := c.rec.legacyLifecycle
	var st objects.State
	switch l.State {
	case legacyCreated:
		st = objects.Created
	case legacyRunning:
		st = objects.Running
	case legacyExited:
		st = objects.Exited
	default:
		return objects.Object{}, false
	}
	return objects.Object{ID: c.rec.ID, Kind: objects.Container, SandboxID: c.rec.SandboxID,
		Name: containerName(c.rec.SandboxID, c.cfg.GetMetadata()), State: st, CreatedAt: c.rec.CreatedAt,
		StartedAt: l.StartedAt, FinishedAt: l.FinishedAt, ExitCode: l.ExitCode, Reason: l.Reason, Message: l.Message,
		Incarnation: l.Incarnation, OOMKilled: l.OOMKilled}, true
}
