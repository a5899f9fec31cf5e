package monitor

import (
	"encoding/binary"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

const (
	v1Text = "oom_kill_disable 0\nunder_oom 1\noom_kill 7\n"
	v2Text = "low 0\nhigh 0\nmax 12\noom 4\noom_kill 3\noom_group_kill 0\n"
)

func TestParseCounter(t *testing.T) {
	cases := []struct {
		name   string
		text   string
		want   uint64
		wantOK bool
	}{
		{"v1 memory.oom_control", v1Text, 7, true},
		{"v2 memory.events: oom and oom_group_kill are other keys", v2Text, 3, true},
		{"no trailing newline", "oom 2\noom_kill 5", 5, true},
		{"huge", "oom_kill 18446744073709551615\n", 1<<64 - 1, true},
		{"empty (file caught while rewritten)", "", 0, false},
		{"kernel before 4.13: no counter", "oom_kill_disable 0\nunder_oom 0\n", 0, false},
		{"garbage value", "oom_kill x\n", 0, false},
		{"half-written value", "oom_kill \n", 0, false},
		{"prefix is not the key", "oom_killer 9\n", 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := parseCounter([]byte(c.text), oomKillKey)
			if got != c.want || ok != c.wantOK {
				t.Errorf("parseCounter(%q) = %d, %v; want %d, %v", c.text, got, ok, c.want, c.wantOK)
			}
		})
	}
}

// A report is due only when the count went up since the previous read, never
// merely because it is above zero (runc's v2 notifier's duplicate reports).
func TestCounterReportsOnlyIncreases(t *testing.T) {
	cases := []struct {
		name     string
		baseline uint64
		reads    []uint64
		want     []bool
	}{
		{"first kill", 0, []uint64{1}, []bool{true}},
		{"same value again and again", 0, []uint64{1, 1, 1}, []bool{true, false, false}},
		{"notification without a kill", 0, []uint64{0, 0}, []bool{false, false}},
		{"kills before registration are not reported", 5, []uint64{5, 6}, []bool{false, true}},
		{"several kills between reads: one report", 1, []uint64{3}, []bool{true}},
		{"counter restarted lower: new baseline", 4, []uint64{0, 1}, []bool{false, true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cnt := counter{last: c.baseline}
			var got []bool
			for _, r := range c.reads {
				got = append(got, cnt.update(r))
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("reports for reads %v after baseline %d: %v, want %v", c.reads, c.baseline, got, c.want)
			}
		})
	}
}

func TestDecodeInotify(t *testing.T) {
	var buf []byte
	add := func(wd int32, mask uint32, name string) {
		rec := make([]byte, unix.SizeofInotifyEvent)
		binary.NativeEndian.PutUint32(rec[0:], uint32(wd))
		binary.NativeEndian.PutUint32(rec[4:], mask)
		padded := 0
		if name != "" {
			padded = (len(name) + 1 + 15) &^ 15 // NUL-terminated, padded like the kernel does
		}
		binary.NativeEndian.PutUint32(rec[12:], uint32(padded))
		rec = append(rec, make([]byte, padded)...)
		copy(rec[unix.SizeofInotifyEvent:], name)
		buf = append(buf, rec...)
	}
	add(1, unix.IN_MODIFY, "")
	add(2, unix.IN_DELETE|unix.IN_ISDIR, "container-1")
	add(1, unix.IN_IGNORED, "")
	got := decodeInotify(append(buf, 0, 1, 2)) // a truncated tail is ignored
	want := []inotifyEvent{
		{1, unix.IN_MODIFY, ""},
		{2, unix.IN_DELETE | unix.IN_ISDIR, "container-1"},
		{1, unix.IN_IGNORED, ""},
	}
	if !slices.Equal(got, want) {
		t.Errorf("decodeInotify = %+v, want %+v", got, want)
	}
}
