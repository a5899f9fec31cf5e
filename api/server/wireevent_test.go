package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/supervisor"
	"github.com/evjournal/containerd/supervisor/journal"
)

// eventToProto is the Event a journal event is sent as: the v0.2 fields,
// the seq, journal id and exitedAt extensions, fields that do not apply to
// the type left zero. eventEncoder must give its exact bytes.
func eventToProto(ev journal.Event, journalID string) *types.Event {
	p := &types.Event{
		Type:      ev.Type,
		Id:        ev.ID,
		Status:    ev.Status,
		Pid:       ev.Pid,
		Timestamp: timestamppb.New(ev.Timestamp),
		Seq:       ev.Seq,
		JournalId: journalID,
	}
	if !ev.ExitedAt.IsZero() {
		p.ExitedAt = timestamppb.New(ev.ExitedAt)
	}
	return p
}

func wireEventCases() []journal.Event {
	now := time.Date(2026, 11, 27, 1, 2, 3, 456789012, time.UTC)
	return []journal.Event{
		{Type: "exit", ID: "c1", Pid: "init", Status: 137, Timestamp: now, Seq: 42, ExitedAt: now.Add(-time.Millisecond)},
		{Type: "start-container", ID: "c1", Timestamp: now, Seq: 1},
		{Type: "exit", ID: "c1", Pid: "init", Status: 0, Timestamp: now, Seq: 2}, // status 0 and no exitedAt: both omitted
		{Type: "oom", ID: "ü-容器-" + string(bytes.Repeat([]byte("x"), 200)), Timestamp: now, Seq: 1<<63 + 5},
		{Type: "exit", ID: "c", Pid: "e1", Status: 1<<32 - 1, Timestamp: time.Unix(0, 500), Seq: 3},                      // seconds 0
		{Type: "pause", ID: "c", Timestamp: time.Unix(1700000000, 0), Seq: 4},                                            // nanos 0
		{Type: "resume", ID: "c", Timestamp: time.Date(1960, 1, 1, 0, 0, 0, 1, time.UTC), Seq: 5},                        // negative seconds
		{Type: "exit", ID: "c", Pid: "init", Timestamp: time.Unix(0, 0), ExitedAt: time.Unix(0, 0).Add(time.Nanosecond)}, // an empty Timestamp message
		{Type: "", ID: "", Timestamp: time.Time{}.Add(time.Hour)},                                                        // nothing but a time far before 1970
		{Type: "start-process", ID: "c", Pid: "exec-1", Timestamp: now, Seq: 9, ExitedAt: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)},
		{Type: "exit", ID: "c", Pid: "init", Status: 1<<32 - 1, Timestamp: time.Date(1, 1, 1, 0, 0, 0, 999999999, time.UTC), Seq: 1<<64 - 1,
			ExitedAt: time.Date(1, 1, 1, 0, 0, 0, 999999999, time.UTC)}, // every varint at its longest
		{Type: "oom", ID: string(bytes.Repeat([]byte("y"), 20000)), Timestamp: now, Seq: 6}, // a length of three bytes: past maxEventSize
	}
}

// The bytes the Events stream sends are proto.Marshal's for the reference
// message, for every field combination and edge of the timestamp encoding.
// One encoder per journal id serves every case, as one stream does, and
// every event's bytes are checked only once all are encoded: carving events
// out of shared chunks must never touch an earlier event's bytes.
func TestWireEventMatchesProto(t *testing.T) {
	cases := wireEventCases()
	for _, jid := range []string{"", "0123456789abcdef0123456789abcdef"} {
		enc := eventEncoder{journalID: jid}
		var got [][]byte
		for round := 0; round < 40; round++ { // past several chunks
			for _, ev := range cases {
				got = append(got, enc.encode(ev).buf)
			}
		}
		for k, b := range got {
			i := k % len(cases)
			ev := cases[i]
			want, err := proto.MarshalOptions{Deterministic: true}.Marshal(eventToProto(ev, jid))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, want) {
				t.Fatalf("case %d, event %d (journal id %q): encoded\n got %x\nwant %x", i, k, jid, b, want)
			}
			if len(ev.ID) < 16<<10 && len(b) > maxEventSize(ev, jid) {
				t.Errorf("case %d: %d bytes, above maxEventSize %d", i, len(b), maxEventSize(ev, jid))
			}
			var back types.Event
			if err := proto.Unmarshal(b, &back); err != nil {
				t.Fatalf("case %d: decode: %v", i, err)
			}
			if !proto.Equal(&back, eventToProto(ev, jid)) {
				t.Errorf("case %d: decoded %v, want %v", i, &back, eventToProto(ev, jid))
			}
		}
	}
}

// Through the real handler and a gRPC server with the daemon's options: a
// stock client decodes every pre-encoded event as its reference message,
// and a request/reply call still goes through the proto codec.
func TestEventsWireOverGRPC(t *testing.T) {
	cases := wireEventCases()
	sub := newFakeSub(io.EOF, cases...)
	b := &fakeBackend{subscribe: func(supervisor.SubscribeRequest) (subscription, error) { return sub, nil }}
	_, c, _ := startServer(t, b)
	if v, err := c.GetServerVersion(context.Background(), &types.GetServerVersionRequest{}); err != nil || v.GetMinor() != 2 {
		t.Fatalf("GetServerVersion = %v, %v", v, err)
	}
	st, err := c.Events(context.Background(), &types.EventsRequest{Timestamp: timestamppb.New(time.Unix(0, 0)), StoredOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range cases {
		got, err := st.Recv()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if want := eventToProto(ev, b.JournalID()); !proto.Equal(got, want) {
			t.Errorf("event %d: got %v, want %v", i, got, want)
		}
	}
	if ev, err := st.Recv(); err != io.EOF {
		t.Fatalf("after the last event: %v, %v; want EOF", ev, err)
	}
}

// BenchmarkEventsReplay100 is a stored-only replay of 100 events through
// the handler, the server's codec and a stock client over an in-memory
// connection: the path of bench's replay_last100_of_10m_grpc_ms without
// the journal. allocs/op counts client and server together.
func BenchmarkEventsReplay100(b *testing.B) {
	now := time.Date(2026, 11, 27, 1, 2, 3, 456789012, time.UTC)
	evs := make([]journal.Event, 100)
	for i := range evs {
		evs[i] = journal.Event{Type: "exit", ID: fmt.Sprintf("container-%04d", i), Pid: "init", Status: 137,
			Timestamp: now.Add(time.Duration(i) * time.Microsecond), Seq: uint64(9_999_900 + i), ExitedAt: now}
	}
	be := &fakeBackend{subscribe: func(supervisor.SubscribeRequest) (subscription, error) { return newFakeSub(io.EOF, evs...), nil }}
	_, c, _ := startServer(b, be)
	req := &types.EventsRequest{Timestamp: timestamppb.New(now), StoredOnly: true}
	b.ReportAllocs()
	for b.Loop() {
		st, err := c.Events(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			if _, err := st.Recv(); err != nil {
				break
			}
			n++
		}
		if n != len(evs) {
			b.Fatalf("%d events, want %d", n, len(evs))
		}
	}
}
