package objects

import (
	"encoding/json"
	"fmt"
	"sort"
)

// A snapshot is the table as it was once the journal held every event up
// to Seq: loading it and applying the journal's events after Seq gives the
// table back. The supervisor writes one (atomically) whenever the table
// changed, and lets the journal's retention drop only events at or below
// the seq of the last snapshot written.

// SnapshotFile is the snapshot's name in the journal dir.
const SnapshotFile = "cri-objects.json"

// snapshotVersion changes when the format does; an unknown one is refused.
const snapshotVersion = 1

type snapshot struct {
	Version int      `json:"version"`
	Journal string   `json:"journal"`
	Seq     uint64   `json:"seq"`
	Objects []Object `json:"objects"`
}

// Snapshot encodes the visible objects as of journal seq.
func (t *Table) Snapshot(journalID string, seq uint64) ([]byte, error) {
	objs := make([]Object, 0, len(t.objs))
	for _, o := range t.objs {
		if o.Visible() {
			objs = append(objs, *o)
		}
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].ID < objs[j].ID })
	return json.Marshal(snapshot{Version: snapshotVersion, Journal: journalID, Seq: seq, Objects: objs})
}

// Loaded is a snapshot read back.
type Loaded struct {
	Table   *Table
	Journal string // the id of the journal whose seqs Seq counts
	Seq     uint64
}

// LoadSnapshot decodes a snapshot. Objects that collide (an id or a name
// twice) make it unreadable: the caller then starts from an empty table and
// the whole journal.
func LoadSnapshot(data []byte) (Loaded, error) {
	var s snapshot
	if err := json.Unmarshal(data, &s); err != nil {
		return Loaded{}, fmt.Errorf("cri objects snapshot: %w", err)
	}
	if s.Version != snapshotVersion {
		return Loaded{}, fmt.Errorf("cri objects snapshot: version %d, this daemon reads %d", s.Version, snapshotVersion)
	}
	t := NewTable()
	for _, o := range s.Objects {
		if o.State == Reserved || o.ID == "" || (o.Kind != Sandbox && o.Kind != Container) {
			return Loaded{}, fmt.Errorf("cri objects snapshot: object %q of kind %q in state %q", o.ID, o.Kind, o.State)
		}
		if err := t.put(o); err != nil {
			return Loaded{}, fmt.Errorf("cri objects snapshot: %w", err)
		}
	}
	return Loaded{Table: t, Journal: s.Journal, Seq: s.Seq}, nil
}
