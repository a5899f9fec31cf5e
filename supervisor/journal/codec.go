package journal

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// maxRecordSize bounds one line. Append refuses larger records so that the
// loader can treat anything longer as garbage without buffering it whole (a
// NUL-filled tail after a crash can be megabytes without a newline).
const maxRecordSize = 1 << 20

// unknownStatus is what v0.2 uses for an exit status that cannot be known;
// out-of-range statuses from old journals are read as this.
const unknownStatus = 255

var (
	errNotObject   = errors.New("record is not a JSON object")
	errNoType      = errors.New("record has no type")
	errNoTimestamp = errors.New("record has no timestamp")
	errNotInteger  = errors.New("not an integer")
)

// UnmarshalJSON reads both the current record format and v0.2.9's, whose
// status may be negative (legacy) or above 255; both read as 255, the v0.2
// "unknown status". Without this a single -1 would fail decoding of a record
// that is otherwise valid.
func (e *Event) UnmarshalJSON(b []byte) error {
	type plain Event // no methods: avoids recursing into this function
	aux := struct {
		*plain
		Status json.Number `json:"status"`
	}{plain: (*plain)(e)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	status, err := parseStatus(aux.Status)
	if err != nil {
		return fmt.Errorf("status %q: %w", aux.Status.String(), err)
	}
	e.Status = status
	return nil
}

// parseStatus maps any integral JSON number to 0..255; absent means 0.
func parseStatus(n json.Number) (uint32, error) {
	if n == "" {
		return 0, nil
	}
	i, err := strconv.ParseInt(n.String(), 10, 64)
	if err == nil {
		return clampStatus(i), nil
	}
	if errors.Is(err, strconv.ErrRange) {
		return unknownStatus, nil
	}
	// Exponent or fraction forms such as 1e2: valid JSON, accept when integral.
	f, err := strconv.ParseFloat(n.String(), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, err
	}
	if f != math.Trunc(f) {
		return 0, errNotInteger
	}
	if f < 0 || f > unknownStatus {
		return unknownStatus, nil
	}
	return uint32(f), nil
}

func clampStatus(v int64) uint32 {
	if v < 0 || v > unknownStatus {
		return unknownStatus
	}
	return uint32(v)
}

// decoder decodes records one after the other, reusing the strings of
// earlier records where they repeat (a replay decodes millions).
type decoder struct {
	last [numFields]string // the previous record's, by field (fieldType...)
	tab  *internTable      // allocated at the first string that is not the previous one
	// The date and time of day ("2006-01-02T15:04:05") of the last
	// timestamp parsed on the fast path, and its seconds since the epoch.
	// Zero until then: no timestamp matches 19 NUL bytes.
	tsPrefix [19]byte
	tsSecs   int64
}

// decode decodes one record (without its newline). It rejects what a torn
// write or garbage can look like yet still parse: non-objects such as `null`
// or `7`, and objects without a type or a timestamp.
func (d *decoder) decode(line []byte) (Event, error) {
	var ev Event
	if err := d.decodeTo(line, &ev); err != nil {
		return Event{}, err
	}
	return ev, nil
}

// decodeTo is decode into *ev, so that a segment decodes straight into its
// slice of events rather than copying each ~140-byte Event out of a return
// value. *ev may hold anything before; after an error it holds garbage.
func (d *decoder) decodeTo(line []byte, ev *Event) error {
	b := trimSpace(line)
	if len(b) == 0 || b[0] != '{' {
		return errNotObject
	}
	if !d.decodeFast(b, ev) {
		slow, err := decodeSlow(b)
		if err != nil {
			return err
		}
		*ev = slow
	}
	if ev.Type == "" {
		return errNoType
	}
	if ev.Timestamp.IsZero() {
		return errNoTimestamp
	}
	return nil
}

// appendRecord appends ev as one JSON line to buf. The timestamp is
// written as RFC 3339 with nanoseconds by time.Time's own encoder.
func appendRecord(buf []byte, ev Event) ([]byte, error) {
	start := len(buf)
	buf, ok := encodeFast(buf, ev)
	if !ok {
		b, err := json.Marshal(ev)
		if err != nil {
			return buf, fmt.Errorf("encode event seq %d: %w", ev.Seq, err)
		}
		buf = append(buf, b...)
	}
	if n := len(buf) - start; n+1 > maxRecordSize {
		return buf[:start], fmt.Errorf("event seq %d is %d bytes: %w", ev.Seq, n, ErrInvalidArgument)
	}
	return append(buf, '\n'), nil
}

// decodeSlow is encoding/json, for the records the fast path does not take.
// Apart so that only these pay for the Event the decoder allocates (ev
// escapes into encoding/json), not the callers' Events.
func decodeSlow(b []byte) (Event, error) {
	ev := new(Event)
	err := json.Unmarshal(b, ev)
	return *ev, err
}

// trimSpace drops leading JSON whitespace.
func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n') {
		b = b[1:]
	}
	return b
}
