// Package journal is the daemon's event journal: append-only segment files of
// JSON lines, one event each, with a small index per segment; replayable
// after a sequence number or a timestamp, streamed from disk.
//
// # On disk
//
// The journal directory holds journal.id and segments. Segment N (its first
// seq) is seg-<N, 20 digits>.log, one JSON object a line. The newest segment
// is appended to; once it holds DefaultSegmentRecords events it is sealed:
// fsynced (under every policy), then its index seg-<N>.idx is written (temp,
// fsync, rename) and a new segment is started (directory fsynced). An index
// is two lines: a summary (first and last seq and timestamp, size, epochs
// starting in the segment) and seek marks (seq, offset, timestamp) every
// 128 records. Open reads the summaries and the newest segment only, so its
// cost does not depend on the journal's length; replays seek through the
// summaries and marks and decode one record at a time. Retention (Options.
// RetainCount) removes whole sealed segments whose every event is older than
// the last RetainCount (log first, then index), never rewriting a retained
// event; readers never serve more than the last RetainCount. Memory holds
// the newest segment's events (they serve live catch-up and are what an
// untrusted segment is rewritten from) and one summary per segment.
//
// A single-file events.log (v0.2's, or this directory's before segments) is
// imported into segments when the directory has none, and left in place.
//
// # Durable before visible
//
// Append stamps an event (Seq, Timestamp, Epoch) and writes it; Commit makes
// everything appended since the last Commit durable per the SyncPolicy and
// only then visible to Since, After, Last and Len, under every policy.
// AppendBatch is Append for each event then Commit, all or nothing.
//
// # Errors
//
// When a write, fsync, truncate, rename or directory sync fails (ENOSPC,
// EDQUOT, EIO, EROFS...), Append, AppendBatch or Commit return a *WriteError
// that names the journal file and wraps the OS error
// (errors.Is(err, syscall.ENOSPC) holds). By then the journal is back at its
// last committed state: the file cut back to the last committed record, the
// events appended since the last Commit dropped from memory (WriteError.
// Discarded says how many; their seqs will be given again), the clock state
// restored, nothing of them readable. The journal stays usable: appending the
// same events again and committing succeeds once the cause is gone. There is
// no permanent broken state.
//
// After a failed fsync the newest segment is not trusted (Linux reports a
// writeback error once and may have dropped the pages: the "fsyncgate"
// class), nor after a failed directory fsync following a rename or a new
// segment, a failed truncate or a failed cut of a torn tail. Until the next
// successful Commit nothing is appended to it: that Commit first rewrites
// the segment's events from memory to a new file (temp file, fsync, rename,
// directory fsync), and nothing new becomes visible unless that rewrite
// succeeded. Sealed segments were fsynced successfully before their index
// was written: only the newest segment can hold unsynced events. If sealing
// keeps failing (no inode for a new file), appends are refused with a
// WriteError once the newest segment holds four segments' worth.
//
// ErrSeqExhausted (the last seq is 2^64-1: seqs never wrap),
// ErrInvalidArgument (an oversized event) and ErrClosed change nothing.
//
// # Identity
//
// ID is made when the journal is created and kept in journal.id beside the
// segments (written before the first segment). It survives restarts and
// retention; a journal recreated because its segments were lost gets a new
// one. A seq means something only together with the id.
//
// # Time
//
// Timestamps strictly increase within an epoch, so a v0.2 client resuming
// "strictly after the timestamp of the last event I saw" neither skips nor
// repeats. A wall clock found more than epochStepBack behind the last event
// starts a new epoch that follows the clock again (recorded in each event's
// epoch field), so an event stamped in the future never pins later
// timestamps. Since documents how "after T" reads across epochs.
//
// # Loading
//
// A torn or garbage tail of the newest segment is cut, garbage between
// records skipped, a record whose seq is not above the previous one skipped
// with a warning (never renumbered); v0.2.9 records without seq are numbered
// on. A sealed segment whose index is missing, unreadable or longer than the
// segment is scanned once and indexed again; an index without its segment
// is removed. Options.Legacy names a v0.2 events.log to import.
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

	// The CRI service's own: a CRI container (or pod) exists from its
	// CreateContainer to its RemoveContainer, longer than the supervisor
	// runs it. 0.2 clients ignore types they do not know (Docker's
	// libcontainerd logs them at debug level).
	TypeCRICreated = "cri-created"
	TypeCRIDeleted = "cri-deleted"
	// TypeCRIStartFailed: a CRI container's (or pod's) start ran no
	// process; it is exited with status 128 (Status) from then on.
	TypeCRIStartFailed = "cri-start-failed"
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
	// Epoch is assigned by Append: it starts at 0 and goes up by one each
	// time the wall clock is found far behind the previous event (see
	// epochStepBack). Timestamps strictly increase within an epoch.
	Epoch uint32 `json:"epoch,omitempty"`
	// ExitedAt is, for an exit, when the shim reaped the process (its own
	// clock, as it reported it); zero when unknown (the shim died first).
	// Timestamp stays the journal's time of the event.
	ExitedAt time.Time `json:"exitedAt,omitzero"`
	// CRI is, for the CRI service's events, what they say of the object:
	// its kind, pod and reserved name on cri-created, the error on
	// cri-start-failed. nil on every other event. These records take the
	// codec's encoding/json path (they are few: one per pod or container).
	CRI *CRIObject `json:"cri,omitempty"`
}

// CRIObject is the CRI part of a cri-created or cri-start-failed event.
type CRIObject struct {
	Kind    string `json:"kind,omitempty"`    // "sandbox" or "container"
	Sandbox string `json:"sandbox,omitempty"` // a container's pod
	Name    string `json:"name,omitempty"`    // the reservation key
	Message string `json:"message,omitempty"` // why a start failed
}
