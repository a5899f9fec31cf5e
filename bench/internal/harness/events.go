package harness

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/evjournal/containerd/api/types"
)

// Received is an event and when the subscriber got it.
type Received struct {
	Ev *types.Event
	At time.Time
}

// Stream is an Events subscription read by its own goroutine as fast as
// events arrive, so the receive time is taken right at Recv.
type Stream struct {
	C      <-chan Received // closed when the stream ends
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// Subscribe opens Events(req) and starts reading. The channel holds up to
// buffer events; a consumer that falls further behind slows the reader (and
// eventually the daemon cuts the stream off, as for any slow client).
func Subscribe(ctx context.Context, c types.APIClient, req *types.EventsRequest, buffer int) (*Stream, error) {
	ctx, cancel := context.WithCancel(ctx)
	st, err := c.Events(ctx, req)
	if err != nil {
		cancel()
		return nil, err
	}
	ch := make(chan Received, buffer)
	s := &Stream{C: ch, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer close(ch)
		for {
			ev, err := st.Recv()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					s.err = err
				}
				return
			}
			ch <- Received{Ev: ev, At: time.Now()}
		}
	}()
	return s, nil
}

// Close cancels the subscription and waits for its reader.
func (s *Stream) Close() {
	s.cancel()
	go func() {
		for range s.C {
		}
	}()
	<-s.done
}

// Err is why the stream ended (nil for EOF); valid once C is closed.
func (s *Stream) Err() error {
	<-s.done
	return s.err
}

// FromStart is the request that replays the whole journal (Timestamp{0,0},
// 1970-01-01, is strictly before every event).
func FromStart(storedOnly bool) *types.EventsRequest {
	return &types.EventsRequest{Timestamp: &timestamppb.Timestamp{}, StoredOnly: storedOnly}
}

// StoredEvents replays the whole journal through the API and returns it.
func StoredEvents(ctx context.Context, c types.APIClient) ([]*types.Event, error) {
	st, err := c.Events(ctx, FromStart(true))
	if err != nil {
		return nil, err
	}
	var out []*types.Event
	for {
		ev, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}
