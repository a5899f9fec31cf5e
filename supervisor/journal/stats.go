package journal

import (
	"sync/atomic"
	"time"
)

// Stats is a snapshot of the journal's counters, for metrics and tests.
type Stats struct {
	Loaded             uint64        // events found at Open (sealed segments counted from their index)
	Appended           uint64        // events appended since Open
	Seals              uint64        // segments sealed (fsynced, indexed) since Open
	SealErrors         uint64        // failed seals (retried as the segment grows)
	RemovedSegments    uint64        // old segments removed by retention since Open
	Syncs              uint64        // fsyncs of journal data (directory syncs not counted)
	DroppedTornBytes   uint64        // bytes cut off the end of the file at Open
	DroppedTornRecords uint64        // torn or invalid records in that tail
	SkippedRecords     uint64        // invalid lines before valid ones, skipped at Open
	OutOfOrder         uint64        // loaded records whose seq was not above the previous one: skipped
	Renumbered         uint64        // loaded records whose timestamp went back a little and was pushed 1 ns on
	WriteErrors        uint64        // failed Append/Commit: the uncommitted events were discarded
	Rewrites           uint64        // untrusted files rewritten from memory
	LastAppend         time.Duration // duration of the last Append (encode, write, sync if any)
	LastSync           time.Duration // duration of the last data fsync
}

// counters backs Stats. Atomics, because Stats is read from other
// goroutines while the writer updates them.
type counters struct {
	loaded, appended, seals, sealErrors, removedSegments, syncs atomic.Uint64
	droppedBytes, droppedRecords, skipped, renumbered           atomic.Uint64
	outOfOrder, writeErrors, rewrites                           atomic.Uint64
	lastAppend, lastSync                                        atomic.Int64
}

func (c *counters) snapshot() Stats {
	return Stats{
		Loaded:             c.loaded.Load(),
		Appended:           c.appended.Load(),
		Seals:              c.seals.Load(),
		SealErrors:         c.sealErrors.Load(),
		RemovedSegments:    c.removedSegments.Load(),
		Syncs:              c.syncs.Load(),
		DroppedTornBytes:   c.droppedBytes.Load(),
		DroppedTornRecords: c.droppedRecords.Load(),
		SkippedRecords:     c.skipped.Load(),
		OutOfOrder:         c.outOfOrder.Load(),
		Renumbered:         c.renumbered.Load(),
		WriteErrors:        c.writeErrors.Load(),
		Rewrites:           c.rewrites.Load(),
		LastAppend:         time.Duration(c.lastAppend.Load()),
		LastSync:           time.Duration(c.lastSync.Load()),
	}
}

// Stats returns the current counters; safe to call from any goroutine.
func (j *Journal) Stats() Stats {
	return j.stats.snapshot()
}
