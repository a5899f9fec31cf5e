package memtrim

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

const sample = `00400000-004c5000 r-xp 00000000 08:01 123 /bin/prog
Size:                788 kB
Rss:                 724 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
004c5000-005c6000 r--p 000c5000 08:01 123 /bin/prog
Rss:                1020 kB
Anonymous:             0 kB
005c6000-005d2000 rw-p 001c6000 08:01 123 /bin/prog
Anonymous:            48 kB
005d2000-005e0000 r--p 001d2000 08:01 123 /bin/prog
Anonymous:             8 kB
7f0000000000-7f0000010000 r-xp 00000000 08:01 456 /lib/libc.so.6
Anonymous:             0 kB
7f0000020000-7f0000030000 rw-p 00000000 00:00 0
Anonymous:            64 kB
`

// TestReadOnlyMappings: only the program's own private read-only mappings
// without anonymous pages are chosen: not its data (writable), not a
// written RELRO (anonymous pages), not a library's, not the heap.
func TestReadOnlyMappings(t *testing.T) {
	got := readOnlyMappings([]byte(sample), []byte("/bin/prog"), make([]mapping, 0, 16))
	want := []mapping{{0x400000, 0x4c5000}, {0x4c5000, 0x5c6000}}
	if len(got) != len(want) {
		t.Fatalf("got %x, want %x", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("mapping %d: got %x, want %x", i, got[i], want[i])
		}
	}
}

// TestReleaseText: in this very process the text is released, its
// resident file pages drop, and the program runs on (its code faults back).
func TestReleaseText(t *testing.T) {
	before := rssFile(t)
	n, err := ReleaseText()
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("nothing released: the test binary's text was not found in smaps")
	}
	after := rssFile(t)
	if after >= before {
		t.Errorf("RssFile %d kB before, %d kB after releasing %d bytes", before, after, n)
	}
	if s := strconv.Itoa(12345); s != "12345" { // code runs on after the release
		t.Fatal(s)
	}
}

func rssFile(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}
