package main

import (
	"testing"
	"time"
)

// The node e2e suite's lifecycle specs build an RFC 3339 time out of
// `date -u +%FT` and `nmeter -d0 '%3t'`: the directive must give HH:MM:SS.mmm.
func TestRender(t *testing.T) {
	now := time.Date(2026, 11, 28, 6, 5, 9, 957_123_456, time.UTC)
	for format, want := range map[string]string{
		"%3t":     "06:05:09.957",
		"%t":      "06:05:09",
		"%6t":     "06:05:09.957123",
		"at %t%%": "at 06:05:09%",
	} {
		got, err := render(format, now)
		if err != nil || got != want {
			t.Errorf("render(%q) = %q, %v; want %q", format, got, err, want)
		}
	}
	for _, bad := range []string{"%c", "%", "%3"} {
		if _, err := render(bad, now); err == nil {
			t.Errorf("render(%q): no error", bad)
		}
	}
}

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		delay int
	}{
		{[]string{"-d0", "%3t"}, 0},
		{[]string{"-d", "250", "%3t"}, 250},
		{[]string{"%3t"}, 1000},
	} {
		d, f, err := parseArgs(tc.args)
		if err != nil || d != tc.delay || f != "%3t" {
			t.Errorf("parseArgs(%q) = %d, %q, %v; want %d, %%3t", tc.args, d, f, err, tc.delay)
		}
	}
	for _, bad := range [][]string{{}, {"-d"}, {"-dx", "%t"}, {"%t", "extra"}} {
		if _, _, err := parseArgs(bad); err == nil {
			t.Errorf("parseArgs(%q): no error", bad)
		}
	}
}
