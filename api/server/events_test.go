package server

import (
	"errors"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/supervisor"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestSubscribeRequest(t *testing.T) {
	year1 := &timestamppb.Timestamp{Seconds: -62135596800} // what `ctr events` sends without -t
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 5, time.UTC)
	tests := []struct {
		name    string
		req     *types.EventsRequest
		after   time.Time
		seq     uint64
		journal string
		wantErr error // class, or the exact error
	}{
		{name: "absent timestamp: no replay", req: &types.EventsRequest{}},
		{name: "0001-01-01: no replay", req: &types.EventsRequest{Timestamp: year1}},
		{name: "Timestamp{0,0}: replay everything", req: &types.EventsRequest{Timestamp: &timestamppb.Timestamp{}},
			after: time.Unix(0, 0)},
		{name: "valid timestamp", req: &types.EventsRequest{Timestamp: timestamppb.New(t0)}, after: t0},
		{name: "before year 1", req: &types.EventsRequest{Timestamp: &timestamppb.Timestamp{Seconds: -62135596801}},
			wantErr: errdefs.ErrInvalidArgument},
		{name: "year 10000", req: &types.EventsRequest{Timestamp: &timestamppb.Timestamp{Seconds: 253402300800}},
			wantErr: errdefs.ErrInvalidArgument},
		{name: "nanos out of range", req: &types.EventsRequest{Timestamp: &timestamppb.Timestamp{Nanos: 1e9}},
			wantErr: errdefs.ErrInvalidArgument},
		{name: "negative nanos", req: &types.EventsRequest{Timestamp: &timestamppb.Timestamp{Nanos: -1}},
			wantErr: errdefs.ErrInvalidArgument},
		{name: "stored only without timestamp", req: &types.EventsRequest{StoredOnly: true},
			wantErr: supervisor.ErrStoredOnlyNeedsTime},
		{name: "stored only with 0001-01-01", req: &types.EventsRequest{StoredOnly: true, Timestamp: year1},
			wantErr: supervisor.ErrStoredOnlyNeedsTime},
		{name: "stored only with {0,0}", req: &types.EventsRequest{StoredOnly: true, Timestamp: &timestamppb.Timestamp{}},
			after: time.Unix(0, 0)},
		{name: "afterSeq wins over timestamp", req: &types.EventsRequest{AfterSeq: 9, Timestamp: timestamppb.New(t0)}, seq: 9},
		{name: "afterSeq ignores an invalid timestamp", req: &types.EventsRequest{AfterSeq: 9,
			Timestamp: &timestamppb.Timestamp{Nanos: -1}}, seq: 9},
		{name: "stored only with afterSeq", req: &types.EventsRequest{AfterSeq: 3, StoredOnly: true}, seq: 3},
		{name: "afterSeq with its journal id", req: &types.EventsRequest{AfterSeq: 3, JournalId: "j1"}, seq: 3, journal: "j1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := subscribeRequest(tt.req)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("error %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !got.After.Equal(tt.after) || got.AfterSeq != tt.seq || got.JournalID != tt.journal || got.StoredOnly != tt.req.StoredOnly {
				t.Fatalf("got %+v, want after %v seq %d", got, tt.after, tt.seq)
			}
			if tt.after.IsZero() && !got.After.IsZero() {
				t.Fatalf("After %v, want the zero time", got.After)
			}
		})
	}
	// The exact v0.2.9 text.
	_, err := subscribeRequest(&types.EventsRequest{StoredOnly: true})
	if err.Error() != "invalid parameter: StoredOnly cannot be specified without setting a valid Timestamp" {
		t.Fatalf("message %q", err)
	}
}
