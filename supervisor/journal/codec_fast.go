package journal

import (
	"strconv"
	"time"
)

// The journal reads millions of records at a replay and writes millions when
// a large journal is built. encoding/json costs ~3 µs to decode a record and
// ~1 µs to encode one; these fast paths handle records as this package writes
// them in a fraction of that, and hand anything else (whitespace, escapes,
// non-ASCII, unknown or repeated keys, nulls, signs, fractions, exponents) to
// encoding/json, so the result is always exactly what encoding/json gives.

// decodeFast reads a record written as encodeFast writes it: one flat
// object, no whitespace, printable ASCII strings without escapes, unsigned
// integers. ok is false for anything else, which encoding/json then reads.
func decodeFast(b []byte) (ev Event, ok bool) {
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return Event{}, false
	}
	var seen uint8
	for i := 1; ; {
		key, j, ok := scanString(b, i)
		if !ok || j >= len(b) || b[j] != ':' {
			return Event{}, false
		}
		val, k, isString, ok := scanValue(b, j+1)
		if !ok || !decodeField(&ev, &seen, key, val, isString) {
			return Event{}, false
		}
		switch {
		case k == len(b)-1:
			return ev, true
		case b[k] != ',':
			return Event{}, false
		}
		i = k + 1
	}
}

// scanString reads a plain string starting at b[i] == '"' and returns its
// contents and the index after the closing quote.
func scanString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c < 0x20 || c >= 0x7f || c == '\\':
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// scanValue reads a plain string or an unsigned integer at b[i].
func scanValue(b []byte, i int) ([]byte, int, bool, bool) {
	if i < len(b) && b[i] == '"' {
		s, j, ok := scanString(b, i)
		return s, j, true, ok
	}
	j := i
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	if j == i || (b[i] == '0' && j > i+1) {
		return nil, 0, false, false
	}
	return b[i:j], j, false, true
}

// fieldBit gives each known key a bit, to refuse repeated keys; 0 for
// unknown keys.
func fieldBit(key string) uint8 {
	switch key {
	case "type":
		return 1
	case "id":
		return 2
	case "pid":
		return 4
	case "status":
		return 8
	case "timestamp":
		return 16
	case "seq":
		return 32
	case "incarnation":
		return 64
	case "epoch":
		return 128
	}
	return 0
}

func decodeField(ev *Event, seen *uint8, k []byte, b []byte, isString bool) bool {
	key := string(k) // no allocation: only compared
	bit := fieldBit(key)
	if bit == 0 || *seen&bit != 0 {
		return false
	}
	*seen |= bit
	numeric := key == "status" || key == "seq" || key == "epoch"
	if numeric == isString {
		return false
	}
	if numeric {
		return decodeNumber(ev, key, b)
	}
	switch key {
	case "type":
		ev.Type = internType(b)
	case "id":
		ev.ID = string(b)
	case "pid":
		ev.Pid = string(b)
	case "incarnation":
		ev.Incarnation = string(b)
	case "timestamp":
		return parseTimestamp(b, &ev.Timestamp)
	}
	return true
}

// internType returns the package's constant for a known event type, so the
// millions of records of a replay do not each allocate it.
func internType(b []byte) string {
	for _, t := range []string{TypeExit, TypeStartContainer, TypeStartProcess, TypeOOM, TypePause, TypeResume} {
		if string(b) == t {
			return t
		}
	}
	return string(b)
}

// parseTimestamp reads the form this package writes, RFC 3339 in UTC with
// 0 to 9 fraction digits ("2026-01-02T03:04:05.000000006Z"), checking
// ranges as time.Parse does; any other form goes to time.Time's own parser.
func parseTimestamp(b []byte, t *time.Time) bool {
	if ts, ok := parseUTC(b); ok {
		*t = ts
		return true
	}
	return t.UnmarshalText(b) == nil
}

func parseUTC(b []byte) (time.Time, bool) {
	if len(b) < 20 || b[len(b)-1] != 'Z' || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' {
		return time.Time{}, false
	}
	y, ok1 := digits(b[0:4])
	mo, ok2 := digits(b[5:7])
	d, ok3 := digits(b[8:10])
	h, ok4 := digits(b[11:13])
	mi, ok5 := digits(b[14:16])
	s, ok6 := digits(b[17:19])
	ns, ok7 := fraction(b[19 : len(b)-1])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7) || mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || s > 59 {
		return time.Time{}, false
	}
	t := time.Date(y, time.Month(mo), d, h, mi, s, ns, time.UTC)
	if t.Day() != d { // 31 April and the like: time.Parse refuses them
		return time.Time{}, false
	}
	return t, true
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

func decodeNumber(ev *Event, key string, raw []byte) bool {
	switch key {
	case "status":
		n, err := strconv.ParseUint(string(raw), 10, 64)
		ev.Status = clampStatus(int64(min(n, unknownStatus+1)))
		return err == nil
	case "seq":
		n, err := strconv.ParseUint(string(raw), 10, 64)
		ev.Seq = n
		return err == nil
	default:
		n, err := strconv.ParseUint(string(raw), 10, 32)
		ev.Epoch = uint32(n)
		return err == nil
	}
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
