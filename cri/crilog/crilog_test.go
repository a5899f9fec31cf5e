package crilog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func openTemp(t *testing.T) *File {
	t.Helper()
	l, err := Open(filepath.Join(t.TempDir(), "0.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func readFile(t *testing.T, path string) []Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// short renders records as "P:content" / "F:content" for table tests.
func short(recs []Record) []string {
	var s []string
	for _, r := range recs {
		tag := "F"
		if r.Partial {
			tag = "P"
		}
		s = append(s, tag+":"+string(r.Content))
	}
	return s
}

func TestStreamWriter(t *testing.T) {
	const max = 8
	tests := []struct {
		name   string
		writes []string
		close  bool
		want   []string
	}{
		{"one line", []string{"hello\n"}, false, []string{"F:hello"}},
		{"two lines in one write", []string{"a\nb\n"}, false, []string{"F:a", "F:b"}},
		{"empty line", []string{"\n"}, false, []string{"F:"}},
		{"line across writes", []string{"hel", "lo\nwor", "ld\n"}, false, []string{"F:hello", "F:world"}},
		{"pending not written before newline", []string{"abc"}, false, nil},
		{"trailing partial on close", []string{"a\nbc"}, true, []string{"F:a", "P:bc"}},
		{"nothing pending on close", []string{"a\n"}, true, []string{"F:a"}},
		{"exactly the bound", []string{"12345678\n"}, false, []string{"F:12345678"}},
		{"one over the bound", []string{"123456789\n"}, false, []string{"P:12345678", "F:9"}},
		{"long line", []string{strings.Repeat("x", 20) + "\n"}, false,
			[]string{"P:xxxxxxxx", "P:xxxxxxxx", "F:xxxx"}},
		{"long line across writes", []string{"12345", "67890", "12345", "678\n"}, false,
			[]string{"P:12345678", "P:90123456", "F:78"}},
		{"bound reached then newline", []string{"12345678", "\n"}, false, []string{"F:12345678"}},
		{"long line without newline closed", []string{strings.Repeat("y", 10)}, true,
			[]string{"P:yyyyyyyy", "P:yy"}},
		{"carriage return kept", []string{"a\r\n"}, false, []string{"F:a\r"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := openTemp(t)
			w := l.Stream(Stdout, max)
			for _, s := range tt.writes {
				if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", s, n, err)
				}
			}
			if tt.close {
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
			}
			got := short(readFile(t, l.Path()))
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("records %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRecordFormat(t *testing.T) {
	l := openTemp(t)
	w := l.Stream(Stderr, 0)
	w.now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC) }
	w.Write([]byte("boom\n"))
	data, err := os.ReadFile(l.Path())
	if err != nil {
		t.Fatal(err)
	}
	want := "2026-01-02T03:04:05.0000006Z stderr F boom\n"
	if string(data) != want {
		t.Fatalf("file %q, want %q", data, want)
	}
}

func TestParseRecord(t *testing.T) {
	tests := []struct {
		line    string
		want    string // "stream tag content", or "" when an error is expected
		wantErr string
	}{
		{line: "2026-01-02T03:04:05.1Z stdout F hi", want: "stdout F hi"},
		{line: "2026-01-02T03:04:05Z stderr P  two spaces", want: "stderr P  two spaces"},
		{line: "2026-01-02T03:04:05+02:00 stdout F ", want: "stdout F "},
		{line: "2026-01-02T03:04:05Z stdout F:x hi", want: "stdout F hi"},
		{line: "", wantErr: "no space after the timestamp"},
		{line: "yesterday stdout F hi", wantErr: "timestamp"},
		{line: "2026-01-02T03:04:05Z stdin F hi", wantErr: "neither stdout nor stderr"},
		{line: "2026-01-02T03:04:05Z stdout X hi", wantErr: "neither P nor F"},
		{line: "2026-01-02T03:04:05Z stdout F", wantErr: "no space after the tag"},
		{line: "2026-01-02T03:04:05Z stdout", wantErr: "no space after the stream"},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			r, err := ParseRecord([]byte(tt.line))
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want ErrFormat with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tag := "F"
			if r.Partial {
				tag = "P"
			}
			if got := r.Stream + " " + tag + " " + string(r.Content); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReaderTornLine(t *testing.T) {
	_, err := ReadAll(strings.NewReader("2026-01-02T03:04:05Z stdout F a\n2026-01-02T03:04:05Z stdout F b"))
	if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("error %v, want an unexpected EOF on line 2", err)
	}
}

// TestConcurrentStreams writes two streams at once, in random chunks with
// lines longer than the bound, and checks that every record parses and each
// stream's bytes come back whole (run with -race).
func TestConcurrentStreams(t *testing.T) {
	l := openTemp(t)
	const max = 64
	inputs := map[string][]byte{Stdout: genOutput(1, 400, max), Stderr: genOutput(2, 400, max)}
	var wg sync.WaitGroup
	for name, data := range inputs {
		wg.Go(func() {
			w := l.Stream(name, max)
			rng := rand.New(rand.NewPCG(uint64(len(name)), 7))
			for p := data; len(p) > 0; {
				n := min(len(p), 1+rng.IntN(3*max))
				if _, err := w.Write(p[:n]); err != nil {
					t.Error(err)
					return
				}
				p = p[n:]
			}
			if err := w.Close(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	recs := readFile(t, l.Path())
	for name, data := range inputs {
		if got := Join(recs, name); !bytes.Equal(got, data) {
			t.Errorf("%s: joined records differ from the input (%d bytes, want %d)", name, len(got), len(data))
		}
	}
	for i, r := range recs {
		if len(r.Content) > max {
			t.Fatalf("record %d has %d bytes, bound %d", i, len(r.Content), max)
		}
	}
}

// genOutput makes lines of random length (0 to 3*max), the last one
// without its newline.
func genOutput(seed uint64, lines, max int) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	var b []byte
	for i := range lines {
		n := rng.IntN(3 * max)
		for j := range n {
			b = append(b, byte('a'+(i+j)%26))
		}
		b = append(b, '\n')
	}
	return append(b, "no newline at the end"...)
}

func TestReopenAfterRename(t *testing.T) {
	l := openTemp(t)
	w := l.Stream(Stdout, 0)
	w.Write([]byte("before\nhalf "))
	rotated := l.Path() + ".1"
	if err := os.Rename(l.Path(), rotated); err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("still old\n")) // kubelet renames, then asks to reopen
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("after\n"))
	if got := short(readFile(t, rotated)); fmt.Sprint(got) != fmt.Sprint([]string{"F:before", "F:half still old"}) {
		t.Fatalf("rotated file %q", got)
	}
	if got := short(readFile(t, l.Path())); fmt.Sprint(got) != fmt.Sprint([]string{"F:after"}) {
		t.Fatalf("new file %q", got)
	}
	fi, err := os.Stat(l.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&^0o640 != 0 {
		t.Fatalf("new file mode %v, want at most 0640", fi.Mode().Perm())
	}
}

func TestReopenFailureKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "pod")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := Open(filepath.Join(sub, "0.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := os.Rename(sub, filepath.Join(dir, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := l.Reopen(); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Reopen in a missing dir: %v, want not-exist", err)
	}
	w := l.Stream(Stdout, 0)
	if _, err := w.Write([]byte("kept\n")); err != nil {
		t.Fatalf("write after a failed reopen: %v", err)
	}
	if got := short(readFile(t, filepath.Join(dir, "moved", "0.log"))); len(got) != 1 {
		t.Fatalf("old file holds %q", got)
	}
}

// TestReopenUsesOpenFunc: Reopen opens through the caller's function, so a
// caller that refuses symlinks keeps refusing them after a rotation.
func TestReopenUsesOpenFunc(t *testing.T) {
	var opened []string
	open := func(path string) (*os.File, error) {
		opened = append(opened, path)
		if len(opened) > 1 {
			return nil, errors.New("refused")
		}
		return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	}
	path := filepath.Join(t.TempDir(), "0.log")
	l, err := OpenWith(path, open)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Reopen(); err == nil || err.Error() != "refused" {
		t.Fatalf("Reopen: %v, want the open function's error", err)
	}
	if fmt.Sprint(opened) != fmt.Sprint([]string{path, path}) {
		t.Fatalf("open function called with %q", opened)
	}
}

func TestOpenMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nope")
	_, err := Open(filepath.Join(dir, "0.log"))
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "log dir "+dir) {
		t.Fatalf("error %v, want one naming the log dir", err)
	}
}

func TestWriteAfterClose(t *testing.T) {
	l := openTemp(t)
	w := l.Stream(Stdout, 0)
	l.Close()
	if _, err := w.Write([]byte("x\n")); !errors.Is(err, ErrClosed) {
		t.Fatalf("error %v, want ErrClosed", err)
	}
	if err := l.Reopen(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Reopen after Close: %v, want ErrClosed", err)
	}
}

func TestCopy(t *testing.T) {
	l := openTemp(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Stream(Stdout, 0).Copy(r, nil) }()
	io.WriteString(w, "one\ntw")
	io.WriteString(w, "o\nthree")
	w.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r.Close()
	if got := short(readFile(t, l.Path())); fmt.Sprint(got) != fmt.Sprint([]string{"F:one", "F:two", "P:three"}) {
		t.Fatalf("records %q", got)
	}
}

// TestCopyKeepsDraining: a closed log file does not stop the copier, so a
// process never blocks on its output; the error comes at the end.
func TestCopyKeepsDraining(t *testing.T) {
	l := openTemp(t)
	l.Close()
	in := strings.Repeat("line\n", 10000)
	err := l.Stream(Stdout, 0).Copy(strings.NewReader(in), make([]byte, 512))
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("error %v, want ErrClosed", err)
	}
}

func TestWriteAllocations(t *testing.T) {
	l := openTemp(t)
	w := l.Stream(Stdout, 64)
	line := []byte("a short line of output\n")
	w.Write(line) // the record buffer grows once
	long := bytes.Repeat([]byte("z"), 200)
	w.Write(long)
	w.Write([]byte("\n"))
	if n := testing.AllocsPerRun(100, func() { w.Write(line) }); n != 0 {
		t.Errorf("Write of a line: %v allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { w.Write(long); w.Write(line) }); n != 0 {
		t.Errorf("Write of a long line: %v allocations, want 0", n)
	}
}
