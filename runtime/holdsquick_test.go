package runtime

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The exit path's quick check finds the incarnation in state.json as the
// daemon writes it (indented), so Retire never decodes the whole record,
// and it answers false for any other incarnation.
func TestNamesIncarnation(t *testing.T) {
	dir := t.TempDir()
	rec := containerRecord{ID: "c1", Bundle: "/b", Runtime: "runc", Shim: "containerd-shim",
		Created: time.Now(), Incarnation: "8f0c2a61d3b94e7f",
		Labels: []string{`"incarnation": "8f0c2a61d3b94e7e"`}} // a string value, escaped: never a key
	path := filepath.Join(dir, stateFile)
	if err := writeJSON(path, &rec); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		data string
		inc  string
		want bool
	}{
		{string(data), rec.Incarnation, true},     // as writeJSON writes it
		{string(data), "8f0c2a61d3b94e7e", false}, // only in the label
		{string(data), "8f0c2a61d3b94e7", false},  // a prefix is not the value
		{string(data), "other", false},
		{`{"incarnation":"abc"}`, "abc", true},
		{"{\"incarnation\":\n\t \"abc\"}", "abc", true},
		{`{"incarnation": "abcd"}`, "abc", false},
		{`{"incarnation": 5, "x": "abc"}`, "abc", false},
		{`{"incarnation"`, "abc", false},
		{``, "abc", false},
	} {
		if got := namesIncarnation([]byte(c.data), c.inc); got != c.want {
			t.Errorf("namesIncarnation(%.60q, %q) = %v, want %v", c.data, c.inc, got, c.want)
		}
	}
}
