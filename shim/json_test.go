package main

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestJSONObject(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]string // raw member values
		ok   bool
	}{
		{`{}`, map[string]string{}, true},
		{` {"a" : 1 , "b":[1, {"c":null}],"d":"x\"y", "e":true,"f":false, "g":-1.5e+3} `,
			map[string]string{"a": "1", "b": `[1, {"c":null}]`, "d": `"x\"y"`, "e": "true", "f": "false", "g": "-1.5e+3"}, true},
		{`{"a":1,"a":2}`, map[string]string{"a": "2"}, true},
		{``, nil, false},
		{`[]`, nil, false},
		{`{"a":1`, nil, false},
		{`{"a":1,}`, nil, false},
		{`{"a":01}`, nil, false},
		{`{"a":1.}`, nil, false},
		{`{"a":tru}`, nil, false},
		{`{"a":"x}`, nil, false},
		{`{a:1}`, nil, false},
		{`{"a":1} x`, nil, false},
		{"{\"a\":\"tab\tin string\"}", nil, false},
	} {
		got, err := jsonObject([]byte(tc.in))
		if (err == nil) != tc.ok {
			t.Errorf("jsonObject(%q): error %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		for k, v := range tc.want {
			if string(got[k]) != v {
				t.Errorf("jsonObject(%q)[%q] = %q, want %q", tc.in, k, got[k], v)
			}
		}
		if len(got) != len(tc.want) {
			t.Errorf("jsonObject(%q) has %d members, want %d", tc.in, len(got), len(tc.want))
		}
	}
}

func TestJSONString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`"plain"`, "plain"},
		{`"q\" b\\ s\/ \b\f\n\r\t"`, "q\" b\\ s/ \b\f\n\r\t"},
		{`"\u00e9\u4e2d"`, "é中"},
		{`"\ud83d\ude00"`, "😀"},
		{`"\ud83d"`, "\uFFFD"},
		{`"\ud83d\u0041"`, "\uFFFDA"},
		{`null`, ""},
	} {
		got, err := jsonString([]byte(tc.in))
		if err != nil || got != tc.want {
			t.Errorf("jsonString(%s) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{`"\x"`, `"\u12"`, `"abc`, `abc`} {
		if _, err := jsonString([]byte(bad)); err == nil {
			t.Errorf("jsonString(%s): no error", bad)
		}
	}
}

// TestAppendJSONString: what we write, encoding/json reads back the same
// (invalid UTF-8 becomes U+FFFD, as encoding/json writes it).
func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"", "plain", `q" b\`, "ctl \x00\x01\x1f\x7f\n\r\t", "é中😀", "bad \xff utf8", "</script>&"} {
		out := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(out, &back); err != nil {
			t.Errorf("%q → %s: %v", s, out, err)
			continue
		}
		want, _ := json.Marshal(s)
		var wantBack string
		json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Errorf("%q → %s → %q, want %q", s, out, back, wantBack)
		}
		if ours, err := jsonString(out); err != nil || ours != back {
			t.Errorf("jsonString(%s) = %q, %v; want %q", out, ours, err, back)
		}
	}
}

func TestJSONStringsIntBool(t *testing.T) {
	if got, err := jsonStrings([]byte(`["a", "b\n"]`)); err != nil || !slices.Equal(got, []string{"a", "b\n"}) {
		t.Errorf("jsonStrings = %q, %v", got, err)
	}
	if _, err := jsonStrings([]byte(`["a", 1]`)); err == nil {
		t.Error("jsonStrings of a number: no error")
	}
	if got, err := jsonInt([]byte(`1000`)); err != nil || got != 1000 {
		t.Errorf("jsonInt = %d, %v", got, err)
	}
	if _, err := jsonInt([]byte(`1.5`)); err == nil {
		t.Error("jsonInt(1.5): no error")
	}
	if _, err := jsonBool([]byte(`"true"`)); err == nil {
		t.Error(`jsonBool("true"): no error`)
	}
}
