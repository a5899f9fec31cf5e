package server

import (
	"time"

	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/evjournal/containerd/supervisor/journal"
)

// The Events stream is the daemon's one bulk reply: a replay sends every
// retained event after a cursor, one message each. Building a types.Event,
// two timestamppb.Timestamps and running the reflective proto marshaller
// for each was half of the daemon's CPU in a replay of the last 100 of
// ten million events (bench: replay_last100_of_10m_grpc_ms). wireEvent is
// the same message encoded directly into one buffer; serverCodec sends it
// as it is and leaves every other message to the proto codec. The bytes
// are those proto.Marshal gives for the types.Event that the test's
// reference, eventToProto, builds (fields in number order, zero values
// omitted): TestWireEventMatchesProto.

// Field numbers of api.proto's Event and of google.protobuf.Timestamp.
const (
	evType      protowire.Number = 1
	evID        protowire.Number = 2
	evStatus    protowire.Number = 3
	evPid       protowire.Number = 4
	evTimestamp protowire.Number = 6
	evSeq       protowire.Number = 7
	evJournalID protowire.Number = 8
	evExitedAt  protowire.Number = 9

	tsSeconds protowire.Number = 1
	tsNanos   protowire.Number = 2
)

// wireEvent is an Event already in protobuf wire form.
type wireEvent struct{ buf []byte }

// maxEventSize is the encoded size of ev at most, for strings shorter than
// 16 KiB: the strings, 3 bytes of tag and length each, 6 of status, 11 of
// seq and 19 per timestamp (10 of them for seconds before 1970).
func maxEventSize(ev journal.Event, journalID string) int {
	return 4*3 + 6 + 11 + 2*19 + len(ev.Type) + len(ev.ID) + len(ev.Pid) + len(journalID)
}

// eventEncoder encodes one stream's events into shared chunks instead of a
// buffer each: a buffer sized by maxEventSize lands in a size class about
// half again its use, and the daemon's garbage during a replay burst (which
// sets how often it collects: bench replay_last100_of_10m_grpc_ms) was half
// these buffers. A chunk's bytes are never written twice: each event takes
// the next free bytes, and the chunk is dropped once full, so gRPC may
// hold an event's bytes as long as it likes.
type eventEncoder struct {
	journalID string
	free      []byte // the unused tail of the current chunk
}

// encodeChunk is the size of the chunks eventEncoder carves events from.
const encodeChunk = 4096

func (e *eventEncoder) encode(ev journal.Event) *wireEvent {
	need := maxEventSize(ev, e.journalID)
	if cap(e.free) < need {
		e.free = make([]byte, 0, max(encodeChunk, need))
	}
	b := appendEvent(e.free[:0:need], ev, e.journalID)
	if len(b) <= need { // else append moved it out of the chunk (a string of 16 KiB or more)
		e.free = e.free[len(b):len(b)]
	}
	return &wireEvent{buf: b[:len(b):len(b)]}
}

// appendEvent appends ev, encoded as the Event message with journalID, to b.
func appendEvent(b []byte, ev journal.Event, journalID string) []byte {
	b = appendString(b, evType, ev.Type)
	b = appendString(b, evID, ev.ID)
	if ev.Status != 0 {
		b = protowire.AppendTag(b, evStatus, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(ev.Status))
	}
	b = appendString(b, evPid, ev.Pid)
	b = appendTimestamp(b, evTimestamp, ev.Timestamp) // always set, as timestamppb.New always makes one
	if ev.Seq != 0 {
		b = protowire.AppendTag(b, evSeq, protowire.VarintType)
		b = protowire.AppendVarint(b, ev.Seq)
	}
	b = appendString(b, evJournalID, journalID)
	if !ev.ExitedAt.IsZero() {
		b = appendTimestamp(b, evExitedAt, ev.ExitedAt)
	}
	return b
}

// appendString appends a proto3 string field; the empty string is omitted.
func appendString(b []byte, n protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, n, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// appendTimestamp appends t as an embedded google.protobuf.Timestamp, as
// timestamppb.New(t) marshals: seconds and nanos, each omitted when zero.
func appendTimestamp(b []byte, n protowire.Number, t time.Time) []byte {
	secs, nanos := t.Unix(), int32(t.Nanosecond())
	size := 0
	if secs != 0 {
		size += protowire.SizeTag(tsSeconds) + protowire.SizeVarint(uint64(secs))
	}
	if nanos != 0 {
		size += protowire.SizeTag(tsNanos) + protowire.SizeVarint(uint64(nanos))
	}
	b = protowire.AppendTag(b, n, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	if secs != 0 {
		b = protowire.AppendTag(b, tsSeconds, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(secs))
	}
	if nanos != 0 {
		b = protowire.AppendTag(b, tsNanos, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(nanos))
	}
	return b
}

// serverCodec is the proto codec, except that a *wireEvent is sent as the
// bytes it holds. It keeps the proto codec's name, so clients see nothing
// different.
type serverCodec struct{ proto encoding.CodecV2 }

func newServerCodec() serverCodec {
	return serverCodec{proto: encoding.GetCodecV2(protoenc.Name)}
}

func (c serverCodec) Marshal(v any) (mem.BufferSlice, error) {
	if w, ok := v.(*wireEvent); ok {
		return mem.BufferSlice{mem.SliceBuffer(w.buf)}, nil
	}
	return c.proto.Marshal(v)
}

func (c serverCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.proto.Unmarshal(data, v) }

func (c serverCodec) Name() string { return c.proto.Name() }
