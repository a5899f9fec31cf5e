package objects

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

// TestSnapshotRoundTrip: a loaded snapshot is the table it was taken of,
// less what a restart forgets (reservations, the starting and removing
// flags of requests that died with the daemon), with its journal and seq,
// and with every name still held.
func TestSnapshotRoundTrip(t *testing.T) {
	tb := podWith(t)
	running(t, tb, "c")
	tb.OOM("c", "inc-c")
	tb.Exit("c", "inc-c", 137, at(5), "")
	created(t, tb, Container, "d", "p", "ctrd")
	ok(t, tb.BeginStart("d"))
	created(t, tb, Container, "e", "p", "ctre")
	ok(t, tb.BeginStart("e"))
	tb.StartFailed("e", "no such file", at(6))
	_, err := tb.BeginRemove("e")
	ok(t, err)
	tb.AbortRemove("e", "busy")
	_, err = tb.BeginRemove("e")
	ok(t, err)
	ok(t, tb.Reserve(Container, "r", "p", "ctrr"))

	data, err := tb.Snapshot("journal-1", 42)
	ok(t, err)
	l, err := LoadSnapshot(data)
	ok(t, err)
	if l.Journal != "journal-1" || l.Seq != 42 {
		t.Fatalf("loaded journal %q seq %d, want journal-1 42", l.Journal, l.Seq)
	}
	want := tb.List()
	for i := range want {
		want[i].Starting, want[i].Removing = false, false
	}
	got := l.Table.List()
	if len(got) != len(want) {
		t.Fatalf("loaded %d objects, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("object %d: loaded %+v, want %+v", i, got[i], want[i])
		}
	}
	if c := get(t, l.Table, "c"); !c.OOMKilled || c.Reason != "OOMKilled" || c.Incarnation != "inc-c" {
		t.Fatalf("exited c loaded as %+v", c)
	}
	if e := get(t, l.Table, "e"); e.CleanupError != "busy" {
		t.Fatalf("e lost its cleanup error: %+v", e)
	}
	if _, found := l.Table.Get("r"); found || l.Table.Len() != len(want) {
		t.Fatal("a reservation was snapshotted")
	}
	for _, o := range want {
		if err := l.Table.Reserve(Sandbox, "new", "", o.Name); !errors.Is(err, errdefs.ErrAlreadyExists) {
			t.Fatalf("the name %q of %s is free after the load: %v", o.Name, o.ID, err)
		}
	}
	ok(t, l.Table.Reserve(Container, "r", "p", "ctrr")) // the reservation's name is free
	ok(t, l.Table.BeginStart("d"))                      // the start under way died with the daemon
	if l.Table.Dirty() {
		t.Fatal("a loaded table is dirty before anything changed")
	}
}

// TestLoadSnapshotRefuses: a snapshot that cannot be the table of a daemon
// is refused whole (the supervisor then replays the whole journal), never
// loaded in part.
func TestLoadSnapshotRefuses(t *testing.T) {
	good, err := podWith(t).Snapshot("j", 7)
	ok(t, err)
	obj := `{"id":"p","kind":"sandbox","name":"pod","state":"running","createdAt":1}`
	cases := []struct{ name, data, text string }{
		{"empty", ``, "snapshot"},
		{"not json", `cri objects`, "snapshot"},
		{"torn", string(good[:len(good)/2]), "snapshot"},
		{"unknown version", `{"version":2,"journal":"j","seq":1,"objects":[]}`, "version 2"},
		{"no version", `{"journal":"j","seq":1,"objects":[]}`, "version 0"},
		{"id twice", `{"version":1,"objects":[` + obj + `,` + strings.Replace(obj, `"pod"`, `"pod2"`, 1) + `]}`, "object p twice"},
		{"name twice", `{"version":1,"objects":[` + obj + `,` + strings.Replace(obj, `"p"`, `"q"`, 1) + `]}`, `"pod" is reserved for p`},
		{"reserved object", `{"version":1,"objects":[` + strings.Replace(obj, "running", "reserved", 1) + `]}`, "reserved"},
		{"no id", `{"version":1,"objects":[` + strings.Replace(obj, `"id":"p"`, `"id":""`, 1) + `]}`, `object ""`},
		{"unknown kind", `{"version":1,"objects":[` + strings.Replace(obj, "sandbox", "vm", 1) + `]}`, `kind "vm"`},
		{"wrong type", `{"version":1,"objects":[{"id":1}]}`, "snapshot"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := LoadSnapshot([]byte(tc.data))
			if err == nil || l.Table != nil {
				t.Fatalf("loaded %+v, want an error", l)
			}
			if !strings.Contains(err.Error(), tc.text) || !strings.Contains(err.Error(), "cri objects snapshot") {
				t.Fatalf("error %q: want it to name the snapshot and %q", err, tc.text)
			}
		})
	}
	if _, err := LoadSnapshot(good); err != nil {
		t.Fatalf("the good snapshot the cases are made from: %v", err)
	}
	var s snapshot
	ok(t, json.Unmarshal(good, &s))
	if s.Version != snapshotVersion || len(s.Objects) != 2 {
		t.Fatalf("snapshot %s", good)
	}
}
