package journal

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"
	"unsafe"
)

func TestDecodeStatus(t *testing.T) {
	tests := []struct {
		status string
		want   uint32
		ok     bool
	}{
		{`0`, 0, true},
		{`137`, 137, true},
		{`255`, 255, true},
		{`256`, 255, true},
		{`300`, 255, true},
		{`-1`, 255, true},
		{`-2147483648`, 255, true},
		{`99999999999999999999999`, 255, true},
		{`1e2`, 100, true},
		{`1e400`, 255, true},
		{`"143"`, 143, true},
		{`null`, 0, true},
		{`1.5`, 0, false},
		{`true`, 0, false},
		{`"x"`, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.status, func(t *testing.T) {
			line := `{"type":"exit","id":"c","status":` + tt.status + `,"timestamp":"2017-03-01T10:00:00+01:00"}`
			ev, err := decodeLine([]byte(line))
			if (err == nil) != tt.ok || ev.Status != tt.want {
				t.Fatalf("got %d, %v; want %d ok=%v", ev.Status, err, tt.want, tt.ok)
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, line := range []string{
		``, `null`, `7`, `"s"`, `[]`, `{}`,
		`{"type":"exit","id":"c"}`,
		`{"id":"c","timestamp":"2017-03-01T10:00:00Z"}`,
		`{"type":"exit","timestamp":"2017-03-01 10:00:00"}`,
		`{"type":"exit","timestamp":"2017-03-01T10:00:00Z","seq":-1}`,
		`{"type":"exit","timestamp":"2017-03-01T10:00:00Z"`,
	} {
		t.Run(line, func(t *testing.T) {
			if ev, err := decodeLine([]byte(line)); err == nil {
				t.Fatalf("accepted %+v", ev)
			}
		})
	}
}

// The Event's JSON names and omitempty rules are the v0.2 wire record.
func TestEncodeFormat(t *testing.T) {
	ev := Event{Type: TypeStartContainer, ID: "c", Timestamp: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Seq: 9}
	b, err := appendRecord(nil, ev)
	want := `{"type":"start-container","id":"c","timestamp":"2026-01-02T03:04:05.000000006Z","seq":9}` + "\n"
	if err != nil || string(b) != want {
		t.Fatalf("got %s, %v", b, err)
	}
	if _, err := appendRecord(nil, Event{Type: TypeExit, ID: string(make([]byte, maxRecordSize))}); err == nil {
		t.Fatal("oversized record accepted")
	}
}

func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"type":"exit","id":"c","pid":"init","status":137,"timestamp":"2026-01-02T03:04:05.000000006Z","seq":9,"incarnation":"x"}`,
		`{"id":"c1","type":"exit","timestamp":"2017-03-01T10:00:02.5+01:00","pid":"e1","status":-1}`,
		`{"id":"c1","type":"exit","timestamp":"2017-03-01T10:00:02-05:00","status":300}`,
		`{"type":"oom","id":"c","timestamp":"2017-03-01T10:00:02Z","status":1e2}`,
		"\x00\x00{\"type\":\"x\"}", `null`, `{"type":`, `{}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		ev, err := decodeLine(line)
		if err != nil {
			return
		}
		b, err := appendRecord(nil, ev)
		if err != nil {
			t.Fatalf("accepted %+v but cannot encode it: %v", ev, err)
		}
		again, err := decodeLine(b[:len(b)-1])
		if err != nil {
			t.Fatalf("re-encoded %s does not decode: %v", b, err)
		}
		if !sameEvent(ev, again) || ev.Timestamp.Format(time.RFC3339Nano) != again.Timestamp.Format(time.RFC3339Nano) {
			t.Fatalf("round trip changed %+v into %+v", ev, again)
		}
	})
}

// FuzzOpen: whatever the file holds, Open succeeds with ordered events, and
// an event appended afterwards survives a reopen.
func FuzzOpen(f *testing.F) {
	f.Add([]byte(`{"type":"exit","id":"c","timestamp":"2017-03-01T10:00:02Z"}` + "\n{\"ty"))
	f.Add([]byte("garbage\n{\"type\":\"exit\",\"id\":\"c\",\"timestamp\":\"2017-03-01T10:00:02Z\",\"seq\":5}\n\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := journalPath(t)
		writeFile(t, path, data)
		j := mustOpen(t, path, Options{RetainCount: 2})
		before := list(t, j.After(0, ""))
		mustAppend(t, j, Event{Type: TypeOOM, ID: "z"})
		mustClose(t, j)
		assertOrdered(t, before)
		j = mustOpen(t, path, Options{RetainCount: 2})
		defer mustClose(t, j)
		if got := list(t, j.After(0, "")); len(got) == 0 || got[len(got)-1].ID != "z" {
			t.Fatalf("appended event lost: %+v", got)
		}
		if info, err := os.Stat(path); err != nil || info.Size() == 0 {
			t.Fatalf("stat: %v", err)
		}
	})
}

// Other packages that json-decode an Event get the same tolerance.
func TestEventUnmarshalJSON(t *testing.T) {
	var ev Event
	err := json.Unmarshal([]byte(`{"type":"exit","id":"c","status":-1,"timestamp":"2017-03-01T10:00:02Z"}`), &ev)
	if err != nil || ev.Status != 255 || ev.ID != "c" {
		t.Fatalf("got %+v, %v", ev, err)
	}
}

// The fast encoder and decoder give exactly what encoding/json gives, for
// events they handle and for those they hand over.
func TestFastCodecMatchesEncodingJSON(t *testing.T) {
	ts := []time.Time{t0, t0.Add(123456789), time.Date(2024, 2, 29, 23, 59, 59, 100, time.UTC), time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("X", 3600))}
	strs := []string{"", "c", "init", "a<b", `q"uote`, "tab\t", "é", "x\\y", "1700000000000000000"}
	for _, tm := range ts {
		for _, s := range strs {
			ev := Event{Type: TypeExit, ID: s, Pid: s, Status: 137, Timestamp: tm, Seq: 42, Incarnation: s, Epoch: 3}
			got, err := appendRecord(nil, ev)
			want, _ := json.Marshal(ev)
			if err != nil || string(got) != string(want)+"\n" {
				t.Fatalf("encode %+v: %s, want %s", ev, got, want)
			}
			dec, err := decodeLine(got[:len(got)-1])
			var ref Event
			if jerr := json.Unmarshal(want, &ref); err != nil || jerr != nil || !sameEvent(dec, ref) || dec.Timestamp.Location() != ref.Timestamp.Location() {
				t.Fatalf("decode %s: %+v, want %+v (%v)", got, dec, ref, err)
			}
		}
	}
	for _, line := range []string{
		`{"type":"exit","id":"c","status":007,"timestamp":"2026-01-02T03:04:05Z"}`,
		`{"type":"exit","id":"c","timestamp":"2026-02-30T03:04:05Z"}`,
		`{"type":"exit","id":"c","timestamp":"2026-01-02T03:04:05.1234567891Z"}`,
		`{"type":"exit","id":"c","id":"d","timestamp":"2026-01-02T03:04:05Z"}`,
		`{"type":"exit","ID":"c","timestamp":"2026-01-02T03:04:05Z"}`,
		`{"type":"exit","id":"c","seq":18446744073709551616,"timestamp":"2026-01-02T03:04:05Z"}`,
		`{"type":"exit","id":"c","status":99999999999999999999,"timestamp":"2026-01-02T03:04:05Z"}`,
	} {
		var fast Event
		fok := new(decoder).decodeFast([]byte(line), &fast)
		var ref Event
		jerr := json.Unmarshal([]byte(line), &ref)
		if fok && (jerr != nil || !sameEvent(fast, ref)) {
			t.Fatalf("%s: fast path gave %+v, encoding/json %+v %v", line, fast, ref, jerr)
		}
	}
}

// The fast timestamp parser agrees with time's own on every form it takes
// and refuses what time refuses.
func TestParseUTCMatchesTime(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		ts := time.Unix(rng.Int64N(253402300799+62135596800)-62135596800, rng.Int64N(1e9)).UTC()
		if i%3 == 0 {
			ts = ts.Truncate(time.Duration(rng.Int64N(int64(time.Second)) + 1))
		}
		b := []byte(ts.Format(time.RFC3339Nano))
		secs, ns, ok := parseUTC(b)
		got := time.Unix(secs, int64(ns))
		want, err := time.Parse(time.RFC3339Nano, string(b))
		if ok != (err == nil) || (ok && !got.Equal(want)) {
			t.Fatalf("%s: fast %v %v, time %v %v", b, got, ok, want, err)
		}
	}
	for _, bad := range []string{"2026-02-29T00:00:00Z", "2026-13-01T00:00:00Z", "2026-01-01T24:00:00Z", "0000-01-01T00:00:00Z", "2026-01-01T00:00:00.Z"} {
		if _, _, ok := parseUTC([]byte(bad)); ok {
			t.Fatalf("%s accepted", bad)
		}
	}
}

// A decoder reuses the previous timestamp's date and time of day: a run of
// records within one second, then the next second, then a prefix it has
// seen followed by a bad fraction must each read as time.Parse reads them
// (the last refused, then read by time's own parser, which refuses too).
func TestDecoderTimestampReuse(t *testing.T) {
	var d decoder
	for _, s := range []string{
		"2026-01-02T03:04:05Z", "2026-01-02T03:04:05.5Z", "2026-01-02T03:04:05.000000006Z",
		"2026-01-02T03:04:06.1Z", "2026-01-02T03:04:06Z", "2026-01-03T03:04:06.25Z",
		"2026-01-03T03:04:06.1234567891Z", "2026-01-03T03:04:06.Z", "2026-01-03T03:04:06.25+01:00",
	} {
		var got time.Time
		ok := d.timestamp([]byte(s), &got)
		want, err := time.Parse(time.RFC3339Nano, s)
		if ok != (err == nil) || (ok && (!got.Equal(want) || got.Location() != want.Location())) {
			t.Fatalf("%s: decoder %v %v, time %v %v", s, got, ok, want, err)
		}
	}
}

// collidingIDs returns n distinct ids whose strings fall in one set of the
// decoder's intern table.
func collidingIDs(t *testing.T, n int) []string {
	t.Helper()
	want := internHash([]byte("id-0")) >> (64 - internBits)
	var out []string
	for i := 0; len(out) < n; i++ {
		if i > 1<<22 {
			t.Fatal("no colliding ids found")
		}
		s := fmt.Sprintf("id-%d", i)
		if internHash([]byte(s))>>(64-internBits) == want {
			out = append(out, s)
		}
	}
	return out
}

// The intern table returns the string for the bytes asked, whatever else
// shares its set or its hash, keeps internWays strings a set, and does not
// keep strings over maxInterned bytes.
func TestInternCollisions(t *testing.T) {
	var d decoder
	ids := collidingIDs(t, internWays+1)
	first := make(map[string]*byte)
	for _, s := range ids[:internWays] {
		got := d.intern([]byte(s))
		if got != s {
			t.Fatalf("intern(%q) = %q", s, got)
		}
		first[s] = unsafe.StringData(got)
	}
	for _, s := range ids[:internWays] { // all four fit: the same strings again
		if got := d.intern([]byte(s)); got != s || unsafe.StringData(got) != first[s] {
			t.Fatalf("intern(%q) = %q, not the string made before", s, got)
		}
	}
	if got := d.intern([]byte(ids[internWays])); got != ids[internWays] { // evicts the oldest, ids[0]
		t.Fatalf("intern(%q) = %q", ids[internWays], got)
	}
	if got := d.intern([]byte(ids[0])); got != ids[0] || unsafe.StringData(got) == first[ids[0]] {
		t.Fatalf("intern(%q) = %q, evicted string still served", ids[0], got)
	}

	// An entry with the same hash but other bytes is not returned.
	b := []byte("container-0001")
	h := internHash(b)
	d.tab[h>>(64-internBits)][0] = internEntry{h: h, s: "container-0002"}
	if got := d.intern(b); got != "container-0001" {
		t.Fatalf("hash-equal entry returned: %q", got)
	}

	long := bytes.Repeat([]byte("x"), maxInterned+1)
	if a, b := d.intern(long), d.intern(long); a != string(long) || unsafe.StringData(a) == unsafe.StringData(b) {
		t.Fatal("a string over maxInterned was kept")
	}
	if got := d.intern(nil); got != "" {
		t.Fatalf("intern(nil) = %q", got)
	}
}

// One decoder reading records in turn, its strings interned or reused
// from the record before, gives what encoding/json gives for each record,
// ids colliding in the intern table included.
func TestDecoderSequenceMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	ids := append(collidingIDs(t, 2*internWays), "c", "", "container-0001", strings.Repeat("a", maxInterned), strings.Repeat("b", maxInterned+3))
	pids := []string{"", "init", "exec-1", ids[0]}
	var d decoder
	for i := range 5000 {
		ev := Event{
			Type: []string{TypeExit, TypeOOM, "custom-type", ids[1]}[rng.IntN(4)], ID: ids[rng.IntN(len(ids))],
			Pid: pids[rng.IntN(len(pids))], Status: uint32(rng.IntN(300)), Timestamp: t0.Add(time.Duration(rng.Int64N(int64(3 * time.Second)))).Truncate(time.Duration(pow10[rng.IntN(10)])),
			Seq: uint64(i), Incarnation: ids[rng.IntN(len(ids))], Epoch: uint32(rng.IntN(3)),
		}
		if rng.IntN(4) == 0 {
			ev.ExitedAt = ev.Timestamp.Add(-time.Millisecond)
		}
		line, err := appendRecord(nil, ev)
		if err != nil {
			t.Fatal(err)
		}
		got, err := d.decode(line[:len(line)-1])
		var want Event
		if jerr := json.Unmarshal(line, &want); err != nil || jerr != nil || !sameEvent(got, want) || !got.ExitedAt.Equal(want.ExitedAt) {
			t.Fatalf("%s: decoder %+v %v, encoding/json %+v %v", line, got, err, want, jerr)
		}
	}
}

// decodeTo fills a slot that held another event: absent keys read as zero.
func TestDecodeToRecycledSlot(t *testing.T) {
	ev := Event{Type: TypeOOM, ID: "x", Pid: "p", Status: 9, Timestamp: t0, Seq: 9, Incarnation: "i", Epoch: 9, ExitedAt: t0}
	line := `{"type":"exit","id":"c","timestamp":"2026-01-02T03:04:05Z"}`
	var d decoder
	if err := d.decodeTo([]byte(line), &ev); err != nil {
		t.Fatal(err)
	}
	var want Event
	if err := json.Unmarshal([]byte(line), &want); err != nil || ev != want {
		t.Fatalf("got %+v, want %+v", ev, want)
	}
}

// badBytes flags first the first byte scanString's byte loop would stop at.
func TestBadBytesFindsTheFirst(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	special := []byte{0, 0x1f, 0x20, '"', '\\', 0x7f, 0x80, 0xa0, 0xff, 'a', 0x21, 0x5c - 1, 0x5c + 1}
	var w [8]byte
	for range 200000 {
		for i := range w {
			if rng.IntN(3) == 0 {
				w[i] = special[rng.IntN(len(special))]
			} else {
				w[i] = byte(rng.IntN(256))
			}
		}
		want := 0
		for want < 8 && plain[w[want]] {
			want++
		}
		bad := badBytes(binary.LittleEndian.Uint64(w[:]))
		if got := bits.TrailingZeros64(bad) / 8; (bad == 0) != (want == 8) || (bad != 0 && got != want) {
			t.Fatalf("% x: first bad byte %d, want %d", w, got, want)
		}
	}
}

// Timestamps within the second of the one before are read without a
// string scan; what that shortcut refuses is read as before, so each
// record still decodes as encoding/json decodes it, including a fresh
// decoder facing NULs where its (zero) last date would be.
func TestDecoderSameSecond(t *testing.T) {
	lines := []string{
		`{"type":"exit","id":"c","timestamp":"` + strings.Repeat("\x00", 19) + `Z"}`,
		`{"type":"exit","id":"c","timestamp":"2026-01-02T03:04:05.5Z"}`,
		`{"type":"exit","id":"c","timestamp":"2026-01-02T03:04:05Z"}`,
		`{"type":"exit","id":"c","timestamp":"2026-01-02T03:04:05.123456789Z","seq":3}`,
		`{"type":"exit","id":"c","timestamp":"2026-01-02T03:04:05.1234567891Z"}`,
		`{"type":"exit","id":"c","timestamp":"2026-01-02T03:04:05.Z"}`,
		`{"type":"exit","id":"c","timestamp":"2026-01-02T03:04:05..1Z"}`,
		`{"type":"exit","id":"c","timestamp":"2026-01-02T03:04:05.1.2Z"}`,
		`{"type":"exit","id":"c","timestamp":"2026-01-02T03:04:05.25+01:00"}`,
		`{"type":"exit","id":"c","timestamp":"2026-01-02T03:04:05.25Z `,
		`{"type":"exit","id":"c","timestamp":"2026-01-02T03:04:05.25Z`,
		`{"type":"exit","id":"c","timestamp":"2026-01-02T03:04:05Zx"}`,
		`{"type":"exit","id":"c","timestamp":"2026-01-02T03:04:05.7Z","exitedAt":"2026-01-02T03:04:05.6Z"}`,
		`{"type":"exit","id":"c","timestamp":"2026-01-02T03:04:06.1Z"}`,
	}
	for _, fresh := range []bool{true, false} {
		var d decoder
		for _, line := range lines {
			if fresh {
				d = decoder{}
			}
			got, err := d.decode([]byte(line))
			var want Event
			jerr := json.Unmarshal([]byte(line), &want)
			if jerr == nil && (want.Type == "" || want.Timestamp.IsZero()) {
				jerr = errNoTimestamp
			}
			if (err == nil) != (jerr == nil) || (err == nil && (!sameEvent(got, want) || got.Timestamp.Location() != want.Timestamp.Location() || !got.ExitedAt.Equal(want.ExitedAt))) {
				t.Fatalf("%q: decoder %+v %v, encoding/json %+v %v", line, got, err, want, jerr)
			}
		}
	}
}

// FuzzDecodeMatchesEncodingJSON: a decoder that has read a record (its
// strings and its second kept) reads any next one as encoding/json does.
func FuzzDecodeMatchesEncodingJSON(f *testing.F) {
	for _, seed := range []string{
		`{"type":"exit","id":"c","pid":"init","status":137,"timestamp":"2026-01-02T03:04:05.000000006Z","seq":9,"incarnation":"x"}`,
		`{"type":"exit","id":"c","timestamp":"2026-01-02T03:04:05.5Z","seq":10,"epoch":2,"exitedAt":"2026-01-02T03:04:05.4Z"}`,
		`{"type":"oom","id":"c","timestamp":"2026-01-02T03:04:05.1234567891Z"}`,
		`{"type":"exit","id":"c","timestamp":"2026-01-02T03:04:05Z","seq":18446744073709551616}`,
	} {
		f.Add([]byte(seed))
	}
	prev := []byte(`{"type":"exit","id":"c","pid":"init","status":1,"timestamp":"2026-01-02T03:04:05.25Z","seq":8,"incarnation":"x"}`)
	f.Fuzz(func(t *testing.T, line []byte) {
		var d decoder
		if _, err := d.decode(prev); err != nil {
			t.Fatal(err)
		}
		got, err := d.decode(line)
		var want Event
		jerr := json.Unmarshal(line, &want)
		if err == nil {
			if jerr != nil || !sameEvent(got, want) || !got.ExitedAt.Equal(want.ExitedAt) || got.Timestamp.Location() != want.Timestamp.Location() {
				t.Fatalf("decoder %+v, encoding/json %+v %v", got, want, jerr)
			}
			return
		}
		if jerr == nil && err != errNotObject && err != errNoType && err != errNoTimestamp {
			t.Fatalf("decoder refused (%v) what encoding/json reads: %+v", err, want)
		}
	})
}

// A field is first compared with the previous record's in place; a value
// that only starts or ends like it, or spells it with an escape, is read
// in full, as encoding/json reads it.
func TestDecoderRepeatedFields(t *testing.T) {
	var d decoder
	for _, pid := range []string{`"init"`, `"init"`, `"init2"`, `"ini"`, `"init"`, `"in\u0069t"`, `"init\""`, `""`, `""`, `"init"`, `"x\"init"`, `"init"`} {
		line := `{"type":"exit","id":"c","pid":` + pid + `,"timestamp":"2026-01-02T03:04:05Z"}`
		got, err := d.decode([]byte(line))
		var want Event
		if jerr := json.Unmarshal([]byte(line), &want); (err == nil) != (jerr == nil) || got.Pid != want.Pid || got.ID != want.ID {
			t.Fatalf("%s: decoder %+v %v, encoding/json %+v %v", line, got, err, want, jerr)
		}
	}
}
