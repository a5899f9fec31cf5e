// Package journal is the daemon's event journal: an append-only file of JSON
// lines, one event each, compacted to a retain count without a window where a
// crash loses retained events, and replayable after a timestamp or sequence.
package journal

import "time"

// Event types published on the v0.2 event stream (docs/api.md section 4).
const (
	TypeStartContainer = "start-container"
	TypeStartProcess   = "start-process"
	TypeExit           = "exit"
	TypeOOM            = "oom"
	TypePause          = "pause"
	TypeResume         = "resume"
)

// Event is one journaled state change. The first five fields are what the v0.2
// API carries; Seq and Incarnation are extensions that old readers ignore.
type Event struct {
	Type      string    `json:"type"`
	ID        string    `json:"id"`
	Pid       string    `json:"pid,omitempty"`
	Status    uint32    `json:"status,omitempty"`
	Timestamp time.Time `json:"timestamp"`
	// Seq is assigned by Append: 1 for the first event ever, +1 for each next one.
	Seq uint64 `json:"seq,omitempty"`
	// Incarnation tells apart two containers that used the same id one after
	// the other; restore uses it to decide whether an exit was already published.
	Incarnation string `json:"incarnation,omitempty"`
}
