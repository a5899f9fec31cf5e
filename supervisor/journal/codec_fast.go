package journal

import (
	"encoding/binary"
	"strconv"
	"time"
)

// The journal reads millions of records at a replay and writes millions when
// a large journal is built. encoding/json costs ~3 µs to decode a record and
// ~1 µs to encode one; these fast paths handle records as this package writes
// them in a fraction of that, and hand anything else (whitespace, escapes,
// non-ASCII, unknown or repeated keys, nulls, signs, fractions, exponents) to
// encoding/json, so the result is always exactly what encoding/json gives.

// decodeFast reads a record written as encodeFast writes it: its keys in
// that order, no whitespace, printable ASCII strings without escapes,
// unsigned integers. ok is false for anything else (a v0.2 record's other
// key order included), which encoding/json then reads.
func (d *decoder) decodeFast(b []byte) (Event, bool) {
	c := cursor{b: b, ok: true}
	var ev Event
	if !c.lit(`{"type":`) {
		return Event{}, false
	}
	ev.Type = internType(c.str())
	if !c.lit(`,"id":`) {
		return Event{}, false
	}
	ev.ID = d.str(0, c.str())
	if c.lit(`,"pid":`) {
		ev.Pid = d.str(1, c.str())
	}
	if c.lit(`,"status":`) {
		c.check(decodeStatus(&ev, c.num()))
	}
	if !c.lit(`,"timestamp":`) {
		return Event{}, false
	}
	c.check(d.timestamp(c.str(), &ev.Timestamp))
	if c.lit(`,"seq":`) {
		c.check(decodeSeq(&ev, c.num()))
	}
	if c.lit(`,"incarnation":`) {
		ev.Incarnation = d.str(2, c.str())
	}
	if c.lit(`,"epoch":`) {
		c.check(decodeEpoch(&ev, c.num()))
	}
	if c.lit(`,"exitedAt":`) {
		c.check(d.timestamp(c.str(), &ev.ExitedAt))
	}
	return ev, c.lit("}") && c.i == len(b)
}

// cursor walks a record; once something does not match, ok stays false.
type cursor struct {
	b  []byte
	i  int
	ok bool
}

// lit consumes s if the record continues with it.
func (c *cursor) lit(s string) bool {
	if !c.ok || len(c.b)-c.i < len(s) || string(c.b[c.i:c.i+len(s)]) != s {
		return false
	}
	c.i += len(s)
	return true
}

func (c *cursor) str() []byte {
	s, j, ok := scanString(c.b, c.i)
	c.check(ok)
	c.i = j
	return s
}

func (c *cursor) num() []byte {
	v, j, ok := scanNumber(c.b, c.i)
	c.check(ok)
	c.i = j
	return v
}

func (c *cursor) check(ok bool) { c.ok = c.ok && ok }

// str returns b as a string, the previous record's field k if equal.
func (d *decoder) str(k int, b []byte) string {
	if string(b) != d.last[k] {
		d.last[k] = string(b)
	}
	return d.last[k]
}

// scanString reads a plain string starting at b[i] == '"' and returns its
// contents and the index after the closing quote. Eight bytes at a time
// while none is a quote, a backslash, a control or a non-ASCII byte.
func scanString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, false
	}
	j := i + 1
	for j+8 <= len(b) && plainWord(binary.LittleEndian.Uint64(b[j:])) {
		j += 8
	}
	for j < len(b) && plain[b[j]] {
		j++
	}
	if j == len(b) || b[j] != '"' {
		return nil, i, false
	}
	return b[i+1 : j], j + 1, true
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// plainWord reports whether the eight bytes of w are all plain. A byte
// >= 0x80 has its high bit set; subtracting 0x20 from a byte below 0x20
// borrows, which sets it; a byte equal to c becomes 0 in w^(c*ones), which
// the zero-byte test finds. Borrows only add false alarms, which the byte
// loop then sorts out.
func plainWord(w uint64) bool {
	bad := w | (w - 0x20*ones) | hasZero(w^('"'*ones)) | hasZero(w^('\\'*ones))
	return bad&highs == 0
}

func hasZero(v uint64) uint64 { return (v - ones) &^ v & highs }

// plain marks the bytes a string may hold on the fast path: printable
// ASCII (and DEL) other than the quote and the backslash.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// internType returns the package's constant for a known event type, so the
// millions of records of a replay do not each allocate it.
func internType(b []byte) string {
	for _, t := range []string{TypeExit, TypeStartContainer, TypeStartProcess, TypeOOM, TypePause, TypeResume, TypeCRICreated, TypeCRIDeleted} {
		if string(b) == t {
			return t
		}
	}
	return string(b)
}

// timestamp reads the form this package writes, RFC 3339 in UTC with 0 to
// 9 fraction digits ("2026-01-02T03:04:05.000000006Z"), checking ranges as
// time.Parse does; any other form goes to time.Time's own parser. It reuses
// the previous record's date and time of day when this one has the same: a
// replay's records come in time order, many within the same second, and
// the calendar arithmetic was a tenth of a full replay's decoding.
func (d *decoder) timestamp(b []byte, t *time.Time) bool {
	if len(b) >= 20 && b[len(b)-1] == 'Z' && string(b[:19]) == string(d.tsPrefix[:]) {
		if ns, ok := fraction(b[19 : len(b)-1]); ok {
			*t = time.Unix(d.tsSecs, int64(ns)).UTC()
			return true
		}
	}
	if secs, ns, ok := parseUTC(b); ok {
		copy(d.tsPrefix[:], b[:19])
		d.tsSecs = secs
		*t = time.Unix(secs, int64(ns)).UTC()
		return true
	}
	return t.UnmarshalText(b) == nil
}

// parseUTC returns the seconds since the epoch and the nanoseconds of a
// timestamp in the form timestamp reads.
func parseUTC(b []byte) (int64, int, bool) {
	if len(b) < 20 || b[len(b)-1] != 'Z' || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' {
		return 0, 0, false
	}
	y, ok1 := digits(b[0:4])
	mo, ok2 := digits(b[5:7])
	d, ok3 := digits(b[8:10])
	h, ok4 := digits(b[11:13])
	mi, ok5 := digits(b[14:16])
	s, ok6 := digits(b[17:19])
	ns, ok7 := fraction(b[19 : len(b)-1])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7) || y < 1 || mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || s > 59 {
		return 0, 0, false
	}
	if d > daysIn(mo, y) { // 31 April and the like: time.Parse refuses them
		return 0, 0, false
	}
	secs := ((daysSinceEpoch(y, mo, d)*24+int64(h))*60+int64(mi))*60 + int64(s)
	return secs, ns, true
}

func daysIn(month, year int) int {
	switch {
	case month == 2 && year%4 == 0 && (year%100 != 0 || year%400 == 0):
		return 29
	case month == 2:
		return 28
	case month == 4 || month == 6 || month == 9 || month == 11:
		return 30
	}
	return 31
}

// daysSinceEpoch is the number of days from 1970-01-01 to the given date
// of the proleptic Gregorian calendar (H. Hinnant's days_from_civil).
func daysSinceEpoch(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400 // y >= 0 here: year 1 to 9999
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era*146097 + doe - 719468)
}

func digits(b []byte) (int, bool) {
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// fraction reads "" or "." followed by 1 to 9 digits as nanoseconds.
func fraction(b []byte) (int, bool) {
	if len(b) == 0 {
		return 0, true
	}
	if b[0] != '.' || len(b) < 2 || len(b) > 10 {
		return 0, false
	}
	n, ok := digits(b[1:])
	for i := len(b) - 1; i < 9; i++ {
		n *= 10
	}
	return n, ok
}

// scanNumber reads an unsigned JSON integer at b[i] (no sign, fraction,
// exponent or leading zero).
func scanNumber(b []byte, i int) ([]byte, int, bool) {
	j := i
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	if j == i || (b[i] == '0' && j > i+1) {
		return nil, i, false
	}
	return b[i:j], j, true
}

func decodeStatus(ev *Event, raw []byte) bool {
	n, err := strconv.ParseUint(string(raw), 10, 64)
	ev.Status = clampStatus(int64(min(n, unknownStatus+1)))
	return err == nil
}

func decodeSeq(ev *Event, raw []byte) bool {
	if len(raw) < 19 { // cannot overflow an int
		n, _ := digits(raw)
		ev.Seq = uint64(n)
		return true
	}
	n, err := strconv.ParseUint(string(raw), 10, 64)
	ev.Seq = n
	return err == nil
}

func decodeEpoch(ev *Event, raw []byte) bool {
	n, err := strconv.ParseUint(string(raw), 10, 32)
	ev.Epoch = uint32(n)
	return err == nil
}

// encodeFast appends ev as encoding/json would marshal it, when every string
// is plain printable ASCII that JSON does not escape and the timestamp is an
// ordinary one; ok is false otherwise.
func encodeFast(buf []byte, ev Event) ([]byte, bool) {
	y := ev.Timestamp.Year()
	if y < 0 || y > 9999 {
		return buf, false
	}
	start := len(buf)
	buf = append(buf, `{"type":`...)
	buf, ok := appendPlain(buf, ev.Type)
	buf = append(buf, `,"id":`...)
	buf, ok2 := appendPlain(buf, ev.ID)
	ok = ok && ok2
	if ev.Pid != "" {
		buf = append(buf, `,"pid":`...)
		buf, ok2 = appendPlain(buf, ev.Pid)
		ok = ok && ok2
	}
	if ev.Status != 0 {
		buf = strconv.AppendUint(append(buf, `,"status":`...), uint64(ev.Status), 10)
	}
	buf = append(buf, `,"timestamp":"`...)
	buf = append(ev.Timestamp.AppendFormat(buf, time.RFC3339Nano), '"')
	if ev.Seq != 0 {
		buf = strconv.AppendUint(append(buf, `,"seq":`...), ev.Seq, 10)
	}
	if ev.Incarnation != "" {
		buf = append(buf, `,"incarnation":`...)
		buf, ok2 = appendPlain(buf, ev.Incarnation)
		ok = ok && ok2
	}
	if ev.Epoch != 0 {
		buf = strconv.AppendUint(append(buf, `,"epoch":`...), uint64(ev.Epoch), 10)
	}
	if !ev.ExitedAt.IsZero() {
		if y := ev.ExitedAt.Year(); y < 0 || y > 9999 {
			return buf[:start], false
		}
		buf = append(buf, `,"exitedAt":"`...)
		buf = append(ev.ExitedAt.AppendFormat(buf, time.RFC3339Nano), '"')
	}
	if !ok {
		return buf[:start], false
	}
	return append(buf, '}'), true
}

// appendPlain quotes s if encoding/json would write it unescaped.
func appendPlain(buf []byte, s string) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return buf, false
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"'), true
}
