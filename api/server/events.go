package server

import (
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/api"
	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/supervisor"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Events streams the journal's events after a cursor, then live events
// (docs/api.md 3.12 and 3.13). The subscription follows the stream's context:
// when the client goes away, Next returns and the deferred Close
// unsubscribes at once, not at the next event (docs/api.md 9.10). A subscriber cut off for lagging gets Unavailable with the
// supervisor's message, which says where to resume.
func (s *Server) Events(r *types.EventsRequest, stream types.API_EventsServer) error {
	req, err := subscribeRequest(r)
	if err != nil {
		return api.ToGRPC(err)
	}
	ctx := stream.Context()
	sub, err := s.sup.Subscribe(ctx, req)
	if err != nil {
		return api.ToGRPC(err)
	}
	defer sub.Close()
	// Headers now, before any event: a client that waits for them knows it
	// is subscribed, so nothing published from then on can pass it by.
	if err := stream.SendHeader(metadata.MD{}); err != nil {
		return err
	}
	enc := eventEncoder{journalID: s.sup.JournalID()}
	for {
		ev, err := sub.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil // stored-only replay done: the client sees EOF
		}
		if err != nil {
			return s.endStream(ctx.Err(), err)
		}
		if err := stream.SendMsg(enc.encode(ev)); err != nil {
			return err
		}
	}
}

// endStream returns the status that ends an event stream: the context's
// error when the client went away, else the subscription's error.
func (s *Server) endStream(ctxErr, err error) error {
	if ctxErr != nil {
		return api.ToGRPC(ctxErr)
	}
	var lag *supervisor.LagError
	if errors.As(err, &lag) {
		s.log.WithField("seq", lag.LastSeq).Warn("event subscriber cut off: too slow")
	}
	return api.ToGRPC(err)
}

// subscribeRequest applies the request rules of docs/api.md 3.13:
//
//   - afterSeq (extension) set: replay after that sequence number, the
//     timestamp is ignored;
//   - timestamp absent, or exactly 0001-01-01T00:00:00Z: no replay;
//   - timestamp invalid: error;
//   - otherwise replay strictly after the timestamp (Timestamp{0,0}, which is
//     1970-01-01, replays everything);
//   - storedOnly without a replay cursor: v0.2.9's error.
func subscribeRequest(r *types.EventsRequest) (supervisor.SubscribeRequest, error) {
	req := supervisor.SubscribeRequest{
		ID:         r.GetId(),
		StoredOnly: r.GetStoredOnly(),
		AfterSeq:   r.GetAfterSeq(),
		JournalID:  r.GetJournalId(),
	}
	if req.AfterSeq == 0 {
		after, err := replayAfter(r.GetTimestamp())
		if err != nil {
			return req, err
		}
		req.After = after
	}
	if req.StoredOnly && req.AfterSeq == 0 && req.After.IsZero() {
		return req, supervisor.ErrStoredOnlyNeedsTime
	}
	return req, nil
}

// replayAfter converts the request's timestamp; the zero time means no replay.
func replayAfter(ts *timestamppb.Timestamp) (time.Time, error) {
	if ts == nil {
		return time.Time{}, nil
	}
	if err := ts.CheckValid(); err != nil {
		return time.Time{}, fmt.Errorf("invalid timestamp: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	t := ts.AsTime()
	if t.Equal(time.Time{}) {
		return time.Time{}, nil // 0001-01-01T00:00:00Z: what `ctr events` sends for "no replay"
	}
	return t, nil
}
