package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/evjournal/containerd/api/types"
	"github.com/urfave/cli/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func eventsCommand() *cli.Command {
	return &cli.Command{
		Name:  "events",
		Usage: "receive events from the containerd daemon",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "timestamp", Aliases: []string{"t"}, Usage: "replay events strictly after this RFC 3339 time, then follow"},
			&cli.StringFlag{Name: "since", Usage: "replay events since a duration ago (10m) or an RFC 3339 time, then follow"},
			&cli.StringFlag{Name: "id", Usage: "only the events of this container"},
			&cli.BoolFlag{Name: "stored-only", Usage: "print the stored events, then exit (all of them without --since/--timestamp)"},
			&cli.Uint64Flag{Name: "after-seq", Usage: "replay events after this sequence number, then follow"},
			&cli.StringFlag{Name: "journal-id", Usage: "with --after-seq: the journalId of the event that seq came with; refused if the daemon's journal is another"},
			formatFlag,
		},
		Action: func(c *cli.Context) error {
			req, err := eventsRequest(c.String("timestamp"), c.String("since"), c.Uint64("after-seq"), c.Bool("stored-only"), time.Now())
			if err != nil {
				return err
			}
			req.Id = c.String("id")
			if req.AfterSeq != 0 {
				req.JournalId = c.String("journal-id")
			}
			format, err := outputFormat(c)
			if err != nil {
				return err
			}
			p := newEventPrinter(stdout, format)
			return withClient(c, func(cl *client) error {
				// The header comes at once, as v0.2.9's did, not with
				// the first event (which may be long in coming).
				if err := p.printHeader(); err != nil {
					return err
				}
				return followEvents(context.Background(), cl, req, p.print)
			})
		},
	}
}

// eventsRequest builds the request from the replay flags. Without any, the
// stream is live only; --stored-only alone replays every stored event
// (Timestamp{0,0} is 1970-01-01, before any event).
func eventsRequest(timestamp, since string, afterSeq uint64, storedOnly bool, now time.Time) (*types.EventsRequest, error) {
	req := &types.EventsRequest{StoredOnly: storedOnly, AfterSeq: afterSeq}
	if timestamp != "" && since != "" {
		return nil, missing("--timestamp and --since cannot be used together")
	}
	switch {
	case timestamp != "":
		t, err := time.Parse(time.RFC3339Nano, timestamp)
		if err != nil {
			return nil, missing("--timestamp %q: want an RFC 3339 time such as 2006-01-02T15:04:05.999999999Z07:00", timestamp)
		}
		req.Timestamp = timestamppb.New(t)
	case since != "":
		t, err := parseSince(since, now)
		if err != nil {
			return nil, err
		}
		req.Timestamp = timestamppb.New(t)
	case storedOnly && afterSeq == 0:
		req.Timestamp = &timestamppb.Timestamp{}
	}
	return req, nil
}

// parseSince accepts a duration before now ("10m", "1h30m") or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, missing("--since %q: the duration must not be negative", s)
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, missing("--since %q: want a duration (10m) or an RFC 3339 time", s)
}

// followEvents prints the stream until it ends (stored-only: EOF). A
// subscriber cut off for lagging resumes after the last sequence it got, so
// nothing is lost or repeated; other errors end the command.
func followEvents(ctx context.Context, cl *client, req *types.EventsRequest, handle func(*types.Event) error) error {
	for {
		stream, err := cl.Events(ctx, req)
		if err != nil {
			return err
		}
		var last *types.Event
		for {
			ev, err := stream.Recv()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				if isLag(err) && last != nil {
					req = resumeAfter(req, last)
					break
				}
				return err
			}
			last = ev
			if err := handle(ev); err != nil {
				return err
			}
		}
	}
}

// resumeAfter returns req moved past ev: by sequence when the daemon sends
// them, else strictly after ev's timestamp (what a v0.2 client does).
func resumeAfter(req *types.EventsRequest, ev *types.Event) *types.EventsRequest {
	next := &types.EventsRequest{Id: req.GetId(), StoredOnly: req.GetStoredOnly()}
	if ev.GetSeq() > 0 {
		// With its journal's id: should the daemon's journal be replaced
		// meanwhile, the resume is refused rather than skipping events.
		next.AfterSeq, next.JournalId = ev.GetSeq(), ev.GetJournalId()
	} else {
		next.Timestamp = ev.GetTimestamp()
	}
	return next
}

// isLag tells a subscriber cut off for being slow (it may resume) from
// other stream errors.
func isLag(err error) bool {
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.Unavailable && strings.Contains(st.Message(), "resume after seq")
}

// tableTime is RFC 3339 with all nine fraction digits, so that the column
// keeps its width (--timestamp accepts it as is).
const tableTime = "2006-01-02T15:04:05.000000000Z07:00"

// eventColumns are the widths of the table's columns but the last (TIME,
// TYPE, ID, PID), and columnGap the spaces after each. They are fixed, not
// measured: the header is printed before any event and each row as it
// arrives, so no writer ever sees two lines together (a tabwriter per line
// sized the header's TIME 23 wide and the rows' 38). A longer value shifts
// only the rest of its own row.
var eventColumns = [...]int{len(tableTime), len("start-container"), 20, 10}

const columnGap = 3

// eventPrinter prints events as a table (v0.2.9's `TIME TYPE ID PID
// STATUS`) or as JSON lines.
type eventPrinter struct {
	out    io.Writer
	format string
	header bool
}

func newEventPrinter(out io.Writer, format string) *eventPrinter {
	return &eventPrinter{out: out, format: format}
}

// eventJSON is one line of `--format json`: every field of the event, the
// extensions included (journalId is what --journal-id takes back).
type eventJSON struct {
	Time      string `json:"time"`
	Type      string `json:"type"`
	ID        string `json:"id"`
	Pid       string `json:"pid,omitempty"`
	Status    uint32 `json:"status"`
	Seq       uint64 `json:"seq,omitempty"`
	JournalID string `json:"journalId,omitempty"`
	ExitedAt  string `json:"exitedAt,omitempty"`
}

func (p *eventPrinter) print(ev *types.Event) error {
	if p.format == "json" {
		return p.printJSON(ev)
	}
	if err := p.printHeader(); err != nil {
		return err
	}
	t := ev.GetTimestamp().AsTime().Local().Format(tableTime)
	_, err := io.WriteString(p.out, tableLine(t, ev.GetType(), ev.GetId(), ev.GetPid(), strconv.FormatUint(uint64(ev.GetStatus()), 10)))
	return err
}

func (p *eventPrinter) printJSON(ev *types.Event) error {
	line := eventJSON{Time: localTime(ev.GetTimestamp()), Type: ev.GetType(), ID: ev.GetId(), Pid: ev.GetPid(),
		Status: ev.GetStatus(), Seq: ev.GetSeq(), JournalID: ev.GetJournalId()}
	if ev.GetExitedAt() != nil {
		line.ExitedAt = localTime(ev.GetExitedAt())
	}
	b, err := json.Marshal(line)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(p.out, "%s\n", b)
	return err
}

func localTime(ts *timestamppb.Timestamp) string {
	return ts.AsTime().Local().Format(time.RFC3339Nano)
}

// printHeader prints the table's header line once (nothing for JSON).
func (p *eventPrinter) printHeader() error {
	if p.format == "json" || p.header {
		return nil
	}
	p.header = true
	_, err := io.WriteString(p.out, tableLine("TIME", "TYPE", "ID", "PID", "STATUS"))
	return err
}

// tableLine pads each cell but the last to its column (eventColumns).
func tableLine(cells ...string) string {
	var b strings.Builder
	for i, c := range cells {
		b.WriteString(c)
		if i < len(eventColumns) {
			b.WriteString(strings.Repeat(" ", max(eventColumns[i]-len(c), 0)+columnGap))
		}
	}
	b.WriteByte('\n')
	return b.String()
}
