package journal

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
	"time"
)

// The journal reads millions of records at a replay and writes millions when
// a large journal is built. encoding/json costs ~3 µs to decode a record and
// ~1 µs to encode one; these fast paths handle records as this package writes
// them in a fraction of that, and hand anything else (whitespace, escapes,
// non-ASCII, unknown or repeated keys, nulls, signs, fractions, exponents) to
// encoding/json, so the result is always exactly what encoding/json gives.

// decodeFast reads a record written as encodeFast writes it into *ev: its
// keys in that order, no whitespace, printable ASCII strings without
// escapes, unsigned integers. ok is false for anything else (a v0.2
// record's other key order included), which encoding/json then reads; *ev
// then holds part of the record.
func (d *decoder) decodeFast(b []byte, ev *Event) bool {
	*ev = Event{} // the slot may be a recycled one: absent keys read as zero
	c := cursor{b: b, ok: true}
	if !c.lit(`{"type":`) {
		return false
	}
	ev.Type = d.field(&c, fieldType)
	if !c.lit(`,"id":`) {
		return false
	}
	ev.ID = d.field(&c, fieldID)
	if c.lit(`,"pid":`) {
		ev.Pid = d.field(&c, fieldPid)
	}
	if c.litKey(&keyStatus) {
		raw, n := c.num()
		c.check(decodeStatus(ev, raw, n))
	}
	if !c.litKey(&keyTimestamp) {
		return false
	}
	if !d.sameSecond(&c, &ev.Timestamp) {
		c.check(d.timestamp(c.str(), &ev.Timestamp))
	}
	if c.lit(`,"seq":`) {
		raw, n := c.num()
		c.check(decodeSeq(ev, raw, n))
	}
	if c.litKey(&keyIncarnation) {
		ev.Incarnation = d.field(&c, fieldIncarnation)
	}
	if c.litKey(&keyEpoch) {
		raw, n := c.num()
		c.check(decodeEpoch(ev, raw, n))
	}
	if c.litKey(&keyExitedAt) {
		c.check(d.timestamp(c.str(), &ev.ExitedAt))
	}
	return c.lit("}") && c.i == len(b)
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

// A key of 9 to 16 bytes, as two overlapping little-endian words: the
// compiler compares a constant string of up to eight bytes with a load and
// a compare but calls memequal for a longer one, five times a record.
type longKey struct {
	n      int
	w0, w1 uint64 // the first eight bytes and the last eight
}

func newKey(s string) longKey {
	if len(s) <= 8 || len(s) > 16 {
		panic("journal: long key of " + strconv.Itoa(len(s)) + " bytes")
	}
	return longKey{len(s), binary.LittleEndian.Uint64([]byte(s)), binary.LittleEndian.Uint64([]byte(s[len(s)-8:]))}
}

var (
	keyStatus      = newKey(`,"status":`)
	keyTimestamp   = newKey(`,"timestamp":`)
	keyIncarnation = newKey(`,"incarnation":`)
	keyEpoch       = newKey(`,"epoch":`)
	keyExitedAt    = newKey(`,"exitedAt":`)
)

// litKey is lit for a longKey.
func (c *cursor) litKey(k *longKey) bool {
	if !c.ok || len(c.b)-c.i < k.n {
		return false
	}
	t := c.b[c.i : c.i+k.n]
	if binary.LittleEndian.Uint64(t) != k.w0 || binary.LittleEndian.Uint64(t[len(t)-8:]) != k.w1 {
		return false
	}
	c.i += k.n
	return true
}

func (c *cursor) str() []byte {
	s, j, ok := scanString(c.b, c.i)
	c.check(ok)
	c.i = j
	return s
}

// num returns the digits of an unsigned integer and their value, exact
// when there are at most maxExactDigits of them.
func (c *cursor) num() ([]byte, uint64) {
	raw, n, j, ok := scanNumber(c.b, c.i)
	c.check(ok)
	c.i = j
	return raw, n
}

func (c *cursor) check(ok bool) { c.ok = c.ok && ok }

// The string fields a decoder remembers from one record to the next.
const (
	fieldType = iota
	fieldID
	fieldPid
	fieldIncarnation
	numFields
)

// field reads the quoted string at the cursor as field k. A record often
// repeats the previous one's type, pid, incarnation, even id: those bytes
// are compared in place, without a scan and without the intern table. The
// remembered strings all came from scanString (or are constants) and are
// plain, so where they match, scanString would have read the same.
func (d *decoder) field(c *cursor, k int) string {
	if s := d.last[k]; c.quoted(s) {
		return s
	}
	var s string
	if k == fieldType {
		s = d.internType(c.str())
	} else {
		s = d.intern(c.str())
	}
	d.last[k] = s
	return s
}

// quoted consumes `"s"` if the record continues with it.
func (c *cursor) quoted(s string) bool {
	n := len(s)
	if !c.ok || len(c.b)-c.i < n+2 || c.b[c.i] != '"' || c.b[c.i+1+n] != '"' || string(c.b[c.i+1:c.i+1+n]) != s {
		return false
	}
	c.i += n + 2
	return true
}

// A journal names the same containers over and over (a replay of millions
// of records may name a few thousand), and a string per field per record
// was a fifth of a replay's decoding, with the garbage collection it
// caused. The decoder keeps the strings it made in a set-associative table
// and returns the same string when the bytes come again. Four ways to a
// set: with fewer, a set that a few busy ids share keeps evicting them in
// turn (with two ways a quarter of 1000 ids cycling through 1024 sets
// missed every time). Memory is bounded: the table is 96 KiB and holds at
// most internSets*internWays strings of at most maxInterned bytes (longer
// strings, such as a garbage record's, are not kept; container ids are 64).
const (
	internBits  = 10
	internSets  = 1 << internBits
	internWays  = 4
	maxInterned = 64
)

// An internEntry keeps its string's hash, so that a lookup compares
// strings only when the hashes are equal.
type internEntry struct {
	h uint64
	s string
}

type internTable [internSets][internWays]internEntry

// intern returns string(b), one made earlier for the same bytes when the
// table still holds it.
func (d *decoder) intern(b []byte) string {
	if len(b) == 0 || len(b) > maxInterned {
		return string(b)
	}
	if d.tab == nil {
		d.tab = new(internTable)
	}
	h := internHash(b)
	set := &d.tab[h>>(64-internBits)]
	for k := range set {
		if set[k].h == h && set[k].s == string(b) {
			return set[k].s
		}
	}
	// The newest first; the oldest of the set goes. A hit does not move
	// its entry: the set's order is that of insertion.
	s := string(b)
	copy(set[1:], set[:internWays-1])
	set[0] = internEntry{h, s}
	return s
}

// internHash mixes every byte of b (1 to maxInterned bytes) into the top
// bits of the result, which pick the set: ids often differ in a few bytes
// only, anywhere (container-0001, container-0002). Eight bytes at a time;
// the last word overlaps the one before rather than being assembled byte
// by byte.
func internHash(b []byte) uint64 {
	const m = 0x9e3779b97f4a7c15
	h := uint64(len(b)) * m
	if len(b) < 8 {
		var w uint64
		for i, c := range b {
			w |= uint64(c) << (8 * i)
		}
		return (h ^ w) * m
	}
	for i := 0; i < len(b)-8; i += 8 {
		h = (h ^ binary.LittleEndian.Uint64(b[i:])) * m
		h ^= h >> 29
	}
	return (h ^ binary.LittleEndian.Uint64(b[len(b)-8:])) * m
}

// scanString reads a plain string starting at b[i] == '"' and returns its
// contents and the index after the closing quote. Eight bytes at a time
// while none is a quote, a backslash, a control or a non-ASCII byte; the
// word that holds one says which byte it is, so that only a string's last
// bytes are looked at one by one.
func scanString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, false
	}
	j := i + 1
	for j+8 <= len(b) {
		if bad := badBytes(binary.LittleEndian.Uint64(b[j:])); bad != 0 {
			j += bits.TrailingZeros64(bad) / 8
			break
		}
		j += 8
	}
	if j+8 > len(b) {
		for j < len(b) && plain[b[j]] {
			j++
		}
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

// badBytes sets the high bit of each byte of w (little-endian) that is not
// plain, and of some bytes after the first such: a byte >= 0x80 has its
// high bit set; subtracting 0x20 from a byte below 0x20 borrows, which
// sets it; a byte equal to c becomes 0 in w^(c*ones), which the zero-byte
// test finds. Borrows only carry upward, so they add false alarms above a
// bad byte, never below it: the lowest bit set is the first bad byte.
func badBytes(w uint64) uint64 {
	return (w | (w - 0x20*ones) | hasZero(w^('"'*ones)) | hasZero(w^('\\'*ones))) & highs
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
func (d *decoder) internType(b []byte) string {
	for _, t := range []string{TypeExit, TypeStartContainer, TypeStartProcess, TypeOOM, TypePause, TypeResume, TypeCRICreated, TypeCRIDeleted, TypeCRIStartFailed} {
		if string(b) == t {
			return t
		}
	}
	return d.intern(b)
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

// sameSecond reads, at the cursor, a quoted timestamp within the second of
// the last one parsed, the common case of a replay, without scanning it as
// a string first: the date and time of day are compared with the last
// ones, then the fraction and the Z are read. Anything else leaves the
// cursor where it was, for scanString and timestamp. What it takes is
// plain (the prefix was parsed before, then digits, '.', 'Z'), so scanString
// would have ended the string at the same quote.
func (d *decoder) sameSecond(c *cursor, t *time.Time) bool {
	if !c.ok || d.tsPrefix[0] == 0 { // nothing parsed yet: the zero prefix matches NULs
		return false
	}
	b := c.b[c.i:]
	if len(b) < 22 || b[0] != '"' || string(b[1:20]) != string(d.tsPrefix[:]) {
		return false
	}
	// The fraction as fraction reads it ("" or '.' and 1 to 9 digits), in
	// the same pass that finds its end.
	j, ns := 20, int64(0)
	if b[j] == '.' {
		for j++; j < len(b) && j < 30 && b[j]-'0' <= 9; j++ {
			ns = ns*10 + int64(b[j]-'0')
		}
		if j == 21 {
			return false
		}
		ns *= pow10[30-j] // 9 - digits
	}
	if j+1 >= len(b) || b[j] != 'Z' || b[j+1] != '"' {
		return false // a tenth digit included
	}
	*t = time.Unix(d.tsSecs, ns).UTC()
	c.i += j + 2
	return true
}

var pow10 = [10]int64{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9}

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
		if c-'0' > 9 { // below '0' wraps around
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

// maxExactDigits is the most decimal digits that cannot overflow a uint64.
const maxExactDigits = 19

// scanNumber reads an unsigned JSON integer at b[i] (no sign, fraction,
// exponent or leading zero) and its value, which wraps past maxExactDigits
// digits: it is summed in the same pass so that the digits are not read
// twice.
func scanNumber(b []byte, i int) ([]byte, uint64, int, bool) {
	j := i
	n := uint64(0)
	for j < len(b) && b[j]-'0' <= 9 {
		n = n*10 + uint64(b[j]-'0')
		j++
	}
	if j == i || (b[i] == '0' && j > i+1) {
		return nil, 0, i, false
	}
	return b[i:j], n, j, true
}

// Longer integers than maxExactDigits go through strconv, which reports
// the overflow that sends the record to encoding/json.

func decodeStatus(ev *Event, raw []byte, n uint64) bool {
	if len(raw) > maxExactDigits {
		var err error
		if n, err = strconv.ParseUint(string(raw), 10, 64); err != nil {
			return false
		}
	}
	ev.Status = clampStatus(int64(min(n, unknownStatus+1)))
	return true
}

func decodeSeq(ev *Event, raw []byte, n uint64) bool {
	if len(raw) > maxExactDigits {
		var err error
		if n, err = strconv.ParseUint(string(raw), 10, 64); err != nil {
			return false
		}
	}
	ev.Seq = n
	return true
}

func decodeEpoch(ev *Event, raw []byte, n uint64) bool {
	if len(raw) > maxExactDigits || n > math.MaxUint32 {
		return false // encoding/json refuses it too
	}
	ev.Epoch = uint32(n)
	return true
}

// encodeFast appends ev as encoding/json would marshal it, when every string
// is plain printable ASCII that JSON does not escape and the timestamp is an
// ordinary one; ok is false otherwise.
func encodeFast(buf []byte, ev Event) ([]byte, bool) {
	y := ev.Timestamp.Year()
	if y < 0 || y > 9999 || ev.CRI != nil {
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
