package main

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func TestParseControl(t *testing.T) {
	for _, tc := range []struct {
		line string
		want controlMsg
		ok   bool
	}{
		{"0 0 0\n", controlMsg{kind: ctlCloseStdin}, true},
		{"1 80 24\n", controlMsg{kind: ctlResize, width: 80, height: 24}, true},
		{"  1\t100   40 \n", controlMsg{kind: ctlResize, width: 100, height: 40}, true},
		{"2 1732640000123456789 0\n", controlMsg{kind: ctlReopenLog, token: 1732640000123456789}, true},
		{"2 x 0\n", controlMsg{}, false},
		{"2 -1 0\n", controlMsg{}, false},
		{"7 1 1", controlMsg{kind: 7, width: 1, height: 1}, true}, // parsed; unknown types are skipped later
		{"1 80\n", controlMsg{}, false},
		{"1 80 24 5\n", controlMsg{}, false},
		{"x 80 24\n", controlMsg{}, false},
		{"1 -1 24\n", controlMsg{}, false},
		{"1 65536 24\n", controlMsg{}, false},
		{"\n", controlMsg{}, false},
	} {
		got, ok := parseControl(tc.line)
		if ok != tc.ok || got != tc.want {
			t.Errorf("parseControl(%q) = %+v, %v; want %+v, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

type recordingController struct{ calls []string }

func (r *recordingController) closeStdin() { r.calls = append(r.calls, "close") }

func (r *recordingController) resize(w, h uint16) {
	r.calls = append(r.calls, "resize "+itoa(int(w))+"x"+itoa(int(h)))
}

func (r *recordingController) reopenLog(token uint64) {
	r.calls = append(r.calls, "reopen "+itoa(int(token)))
}

func itoa(n int) string { return string(appendDigits(nil, n, 1)) }

// TestServeControl: lines are applied in order; malformed, unknown and
// over-long lines are skipped without losing the lines after them.
func TestServeControl(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	input := "1 80 24\n" +
		"garbage\n" +
		"1 " + strings.Repeat("9", 1000) + " 1\n" + // longer than the read buffer
		"5 0 0\n" +
		"0 0 0\n" +
		"2 42 0\n" +
		"1 100 40\n"
	go func() {
		w.WriteString(input)
		w.Close()
	}()
	var rec recordingController
	serveControl(r, &rec, &logger{})
	want := []string{"resize 80x24", "close", "reopen 42", "resize 100x40"}
	if !slices.Equal(rec.calls, want) {
		t.Errorf("calls %q, want %q", rec.calls, want)
	}
}
