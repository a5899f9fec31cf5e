package objects

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
)

// t0 is the time of the first transition in these tests; later ones add
// seconds to it.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func ok(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// created reserves and commits an object.
func created(t *testing.T, tb *Table, kind Kind, id, sandbox, name string) {
	t.Helper()
	ok(t, tb.Reserve(kind, id, sandbox, name))
	ok(t, tb.Commit(id, at(1)))
}

// running makes a created object run as incarnation "inc-"+id.
func running(t *testing.T, tb *Table, id string) {
	t.Helper()
	ok(t, tb.BeginStart(id))
	if !tb.Started(id, "inc-"+id, 100, at(2)) {
		t.Fatalf("Started(%s) changed nothing", id)
	}
}

// podWith is a table with running pod "p" ("pod") and created container
// "c" ("ctr") of it.
func podWith(t *testing.T) *Table {
	t.Helper()
	tb := NewTable()
	created(t, tb, Sandbox, "p", "", "pod")
	running(t, tb, "p")
	created(t, tb, Container, "c", "p", "ctr")
	return tb
}

func get(t *testing.T, tb *Table, id string) Object {
	t.Helper()
	o, found := tb.Get(id)
	if !found {
		t.Fatalf("object %s is not in the table", id)
	}
	return o
}

// wantErr checks err's class and that its text holds every one of texts.
func wantErr(t *testing.T, err, class error, texts ...string) {
	t.Helper()
	if !errors.Is(err, class) {
		t.Fatalf("error %v: want class %v", err, class)
	}
	for _, s := range texts {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("error %q does not name %q", err, s)
		}
	}
}

// TestReserve: a name is held by one object at a time, a refusal names the
// holder (kubelet shows it), and a container needs a visible pod that is not
// being removed. A refused reservation changes nothing.
func TestReserve(t *testing.T) {
	cases := []struct {
		name    string
		setup   func(t *testing.T, tb *Table)
		kind    Kind
		id, sb  string
		objName string
		class   error  // nil: accepted
		text    string // in the error
	}{
		{"pod", nil, Sandbox, "p2", "", "pod2", nil, ""},
		{"container of a running pod", nil, Container, "c2", "p", "ctr2", nil, ""},
		{"container of a created pod", func(t *testing.T, tb *Table) { created(t, tb, Sandbox, "q", "", "podq") },
			Container, "c2", "q", "ctr2", nil, ""},
		{"name held by a visible object", nil, Sandbox, "p2", "", "pod", errdefs.ErrAlreadyExists, `"pod" is reserved for p`},
		{"name held by a reservation", func(t *testing.T, tb *Table) { ok(t, tb.Reserve(Sandbox, "r", "", "podr")) },
			Sandbox, "p2", "", "podr", errdefs.ErrAlreadyExists, "reserved for r"},
		{"container name held", nil, Container, "c2", "p", "ctr", errdefs.ErrAlreadyExists, "reserved for c"},
		{"id taken", nil, Sandbox, "p", "", "other", errdefs.ErrAlreadyExists, "p exists"},
		{"unknown kind", nil, Kind("vm"), "x", "", "x", errdefs.ErrInvalidArgument, "vm"},
		{"no id", nil, Sandbox, "", "", "x", errdefs.ErrInvalidArgument, "required"},
		{"no name", nil, Sandbox, "x", "", "", errdefs.ErrInvalidArgument, "required"},
		{"container of no pod", nil, Container, "c2", "nope", "ctr2", errdefs.ErrNotFound, "nope"},
		{"container of a reserved pod", func(t *testing.T, tb *Table) { ok(t, tb.Reserve(Sandbox, "r", "", "podr")) },
			Container, "c2", "r", "ctr2", errdefs.ErrNotFound, "r"},
		{"container of a container", nil, Container, "c2", "c", "ctr2", errdefs.ErrNotFound, "c"},
		{"container of a pod being removed", func(t *testing.T, tb *Table) {
			created(t, tb, Sandbox, "q", "", "podq")
			_, err := tb.BeginRemove("q")
			ok(t, err)
		}, Container, "c2", "q", "ctr2", errdefs.ErrFailedPrecondition, "being removed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tb := podWith(t)
			if tc.setup != nil {
				tc.setup(t, tb)
			}
			before, n := tb.List(), tb.Len()
			err := tb.Reserve(tc.kind, tc.id, tc.sb, tc.objName)
			if tc.class == nil {
				ok(t, err)
				if o := get(t, tb, tc.id); o.State != Reserved || o.Visible() || len(tb.List()) != len(before) {
					t.Fatalf("a reservation is visible: %+v", o)
				}
				return
			}
			wantErr(t, err, tc.class, tc.text)
			if tb.Len() != n || len(tb.List()) != len(before) {
				t.Fatal("a refused reservation changed the table")
			}
		})
	}
}

// TestNameTakenErrorNamesHolder: the holder is there for the CRI service
// to put in its message, not only in the text.
func TestNameTakenErrorNamesHolder(t *testing.T) {
	tb := podWith(t)
	var nt *NameTakenError
	if err := tb.Reserve(Sandbox, "p2", "", "pod"); !errors.As(err, &nt) || nt.Holder != "p" || nt.Name != "pod" {
		t.Fatalf("got %v, want a NameTakenError for pod held by p", err)
	}
}

// TestReleaseAndCommit: a released reservation frees its name and id; a
// committed object is visible and no longer released; commit is for
// reservations only.
func TestReleaseAndCommit(t *testing.T) {
	tb := NewTable()
	ok(t, tb.Reserve(Sandbox, "p", "", "pod"))
	tb.Release("p")
	if _, found := tb.Get("p"); found {
		t.Fatal("a released reservation is still in the table")
	}
	ok(t, tb.Reserve(Sandbox, "p2", "", "pod")) // the name is free again
	wantErr(t, tb.Commit("p", at(1)), errdefs.ErrNotFound, "p")
	ok(t, tb.Commit("p2", at(3)))
	if o := get(t, tb, "p2"); o.State != Created || o.CreatedAt != at(3).UnixNano() || len(tb.List()) != 1 {
		t.Fatalf("committed: %+v", o)
	}
	wantErr(t, tb.Commit("p2", at(4)), errdefs.ErrFailedPrecondition, "not reserved")
	tb.Release("p2") // a visible object is not released
	if _, found := tb.Get("p2"); !found {
		t.Fatal("Release forgot a committed object")
	}
}

// TestBeginStart: one start at a time, of a created object only, never
// during a removal, and a container's only in a running pod. A refusal
// leaves the object as it was.
func TestBeginStart(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, tb *Table)
		id    string
		class error // nil: accepted
		text  string
	}{
		{"created container of a running pod", nil, "c", nil, ""},
		{"unknown", nil, "nope", errdefs.ErrNotFound, "nope"},
		{"reserved", func(t *testing.T, tb *Table) { ok(t, tb.Reserve(Container, "r", "p", "ctrr")) },
			"r", errdefs.ErrNotFound, "r"},
		{"running", func(t *testing.T, tb *Table) { running(t, tb, "c") }, "c", errdefs.ErrFailedPrecondition, "running, not created"},
		{"exited", func(t *testing.T, tb *Table) {
			running(t, tb, "c")
			tb.Exit("c", "", 0, at(5), "")
		}, "c", errdefs.ErrFailedPrecondition, "exited, not created"},
		{"start failed", func(t *testing.T, tb *Table) {
			ok(t, tb.BeginStart("c"))
			tb.StartFailed("c", "no runc", at(5))
		}, "c", errdefs.ErrFailedPrecondition, "exited, not created"},
		{"starting already", func(t *testing.T, tb *Table) { ok(t, tb.BeginStart("c")) },
			"c", errdefs.ErrFailedPrecondition, "being started already"},
		{"being removed", func(t *testing.T, tb *Table) {
			_, err := tb.BeginRemove("c")
			ok(t, err)
		}, "c", errdefs.ErrFailedPrecondition, "being removed"},
		{"pod created, not running", func(t *testing.T, tb *Table) {
			created(t, tb, Sandbox, "q", "", "podq")
			created(t, tb, Container, "d", "q", "ctrd")
		}, "d", errdefs.ErrFailedPrecondition, "pod sandbox q is not ready"},
		{"pod exited", func(t *testing.T, tb *Table) { tb.Exit("p", "", 137, at(5), "") },
			"c", errdefs.ErrFailedPrecondition, "pod sandbox p is not ready"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tb := podWith(t)
			if tc.setup != nil {
				tc.setup(t, tb)
			}
			before, _ := tb.Get(tc.id)
			err := tb.BeginStart(tc.id)
			if tc.class == nil {
				ok(t, err)
				if o := get(t, tb, tc.id); !o.Starting || o.State != Created {
					t.Fatalf("after BeginStart: %+v, want created and starting", o)
				}
				return
			}
			wantErr(t, err, tc.class, tc.text)
			if after, _ := tb.Get(tc.id); after != before {
				t.Fatalf("a refused start changed the object: %+v, was %+v", after, before)
			}
		})
	}
}

// TestStartVerdicts: a start ends running (with its incarnation), exited
// 128/StartError (nothing ran), or aborted (created again, startable).
// A verdict about an object that is not created changes nothing.
func TestStartVerdicts(t *testing.T) {
	tb := podWith(t)
	ok(t, tb.BeginStart("c"))
	tb.AbortStart("c")
	if o := get(t, tb, "c"); o.Starting || o.State != Created {
		t.Fatalf("after AbortStart: %+v", o)
	}
	ok(t, tb.BeginStart("c"))
	if !tb.Started("c", "inc1", 42, at(3)) {
		t.Fatal("Started changed nothing")
	}
	want := get(t, tb, "c")
	if want.State != Running || want.Starting || want.Incarnation != "inc1" || want.Pid != 42 || want.StartedAt != at(3).UnixNano() {
		t.Fatalf("started: %+v", want)
	}
	if tb.Started("c", "inc2", 43, at(4)) || tb.StartFailed("c", "late", at(4)) || get(t, tb, "c") != want {
		t.Fatal("a second verdict changed a running object")
	}

	created(t, tb, Container, "d", "p", "ctrd")
	ok(t, tb.BeginStart("d"))
	if !tb.StartFailed("d", "exec: no such file", at(5)) {
		t.Fatal("StartFailed changed nothing")
	}
	o := get(t, tb, "d")
	if o.State != Exited || o.Starting || o.ExitCode != 128 || o.Reason != "StartError" ||
		o.Message != "exec: no such file" || o.FinishedAt != at(5).UnixNano() {
		t.Fatalf("failed start: %+v, want exited 128 StartError", o)
	}
	if tb.Started("d", "inc3", 1, at(6)) || get(t, tb, "d") != o {
		t.Fatal("a start-container over a failed start changed it")
	}
	if tb.Started("nope", "x", 1, at(6)) || tb.StartFailed("nope", "x", at(6)) {
		t.Fatal("a verdict about an unknown object changed the table")
	}
}

// TestExit: the exit of the object's process gives its code, time and
// kubelet's reason; an OOM kill before it makes the reason OOMKilled. An
// exit of another incarnation of the id, or one replayed over an exit, or
// of an object that does not run, changes nothing.
func TestExit(t *testing.T) {
	cases := []struct {
		name    string
		oom     string // OOM of this incarnation first ("-": none)
		inc     string // the exit's incarnation
		status  uint32
		changed bool
		code    int32
		reason  string
	}{
		{"completed", "-", "inc-c", 0, true, 0, "Completed"},
		{"error", "-", "inc-c", 3, true, 3, "Error"},
		{"killed", "-", "inc-c", 137, true, 137, "Error"},
		{"oom then exit", "inc-c", "inc-c", 137, true, 137, "OOMKilled"},
		{"oom then exit 0", "inc-c", "inc-c", 0, true, 0, "OOMKilled"},
		{"oom of another incarnation", "old", "inc-c", 137, true, 137, "Error"},
		{"oom of any incarnation", "", "inc-c", 137, true, 137, "OOMKilled"},
		{"exit of any incarnation", "-", "", 255, true, 255, "Error"},
		{"exit of another incarnation", "-", "old", 1, false, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tb := podWith(t)
			running(t, tb, "c")
			if tc.oom != "-" {
				tb.OOM("c", tc.oom)
			}
			before := get(t, tb, "c")
			if got := tb.Exit("c", tc.inc, tc.status, at(9), "msg"); got != tc.changed {
				t.Fatalf("Exit reported changed=%v, want %v", got, tc.changed)
			}
			o := get(t, tb, "c")
			if !tc.changed {
				if o != before {
					t.Fatalf("an ignored exit changed the object: %+v, was %+v", o, before)
				}
				return
			}
			if o.State != Exited || o.ExitCode != tc.code || o.Reason != tc.reason || o.FinishedAt != at(9).UnixNano() ||
				o.Pid != 0 || o.Message != "msg" || o.Incarnation != "inc-c" {
				t.Fatalf("exited: %+v, want code %d reason %s", o, tc.code, tc.reason)
			}
			// Replayed again, or an OOM after it: nothing changes.
			if tb.Exit("c", tc.inc, 9, at(10), "") || tb.OOM("c", "inc-c") || get(t, tb, "c") != o {
				t.Fatal("an exit or OOM over an exit changed the object")
			}
		})
	}
}

// TestOOM: an OOM is recorded once, for the running incarnation only.
func TestOOM(t *testing.T) {
	tb := podWith(t)
	if tb.OOM("c", "") {
		t.Fatal("an OOM of a created object was recorded")
	}
	running(t, tb, "c")
	if tb.OOM("c", "old") {
		t.Fatal("an OOM of another incarnation was recorded")
	}
	if !tb.OOM("c", "inc-c") || !get(t, tb, "c").OOMKilled {
		t.Fatal("the OOM was not recorded")
	}
	if tb.OOM("c", "inc-c") {
		t.Fatal("a second OOM reported a change")
	}
}

// TestBeginRemove: what runs or is being started is not removed, nor a pod
// that has containers (reserved ones too); a removal refuses starts, and
// one that failed leaves the object visible with why.
func TestBeginRemove(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, tb *Table)
		id    string
		class error // nil: accepted
		text  string
	}{
		{"created container", nil, "c", nil, ""},
		{"exited container", func(t *testing.T, tb *Table) {
			running(t, tb, "c")
			tb.Exit("c", "", 0, at(5), "")
		}, "c", nil, ""},
		{"exited pod without containers", func(t *testing.T, tb *Table) {
			tb.Remove("c")
			tb.Exit("p", "", 0, at(5), "")
		}, "p", nil, ""},
		{"unknown", nil, "nope", errdefs.ErrNotFound, "nope"},
		{"reserved", func(t *testing.T, tb *Table) { ok(t, tb.Reserve(Container, "r", "p", "ctrr")) },
			"r", errdefs.ErrNotFound, "r"},
		{"running container", func(t *testing.T, tb *Table) { running(t, tb, "c") }, "c", errdefs.ErrFailedPrecondition, "still runs"},
		{"running pod", func(t *testing.T, tb *Table) { tb.Remove("c") }, "p", errdefs.ErrFailedPrecondition, "still runs"},
		{"starting", func(t *testing.T, tb *Table) { ok(t, tb.BeginStart("c")) }, "c", errdefs.ErrFailedPrecondition, "being started"},
		{"pod with a container", func(t *testing.T, tb *Table) { tb.Exit("p", "", 0, at(5), "") },
			"p", errdefs.ErrFailedPrecondition, "still has container c"},
		{"pod with a reserved container", func(t *testing.T, tb *Table) {
			tb.Remove("c")
			ok(t, tb.Reserve(Container, "r", "p", "ctrr"))
			tb.Exit("p", "", 0, at(5), "")
		}, "p", errdefs.ErrFailedPrecondition, "still has container r"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tb := podWith(t)
			if tc.setup != nil {
				tc.setup(t, tb)
			}
			before, _ := tb.Get(tc.id)
			o, err := tb.BeginRemove(tc.id)
			if tc.class != nil {
				wantErr(t, err, tc.class, tc.text)
				if after, _ := tb.Get(tc.id); after != before {
					t.Fatalf("a refused removal changed the object: %+v, was %+v", after, before)
				}
				return
			}
			ok(t, err)
			if !o.Removing || !get(t, tb, tc.id).Removing {
				t.Fatalf("BeginRemove returned %+v, want it removing", o)
			}
			wantErr(t, tb.BeginStart(tc.id), errdefs.ErrFailedPrecondition, "being removed")
			tb.AbortRemove(tc.id, "umount: busy")
			if a := get(t, tb, tc.id); a.Removing || a.CleanupError != "umount: busy" || !a.Visible() {
				t.Fatalf("after a failed removal: %+v, want it visible with its cleanup error", a)
			}
			_, err = tb.BeginRemove(tc.id) // kubelet's retry
			ok(t, err)
			if !tb.Remove(tc.id) {
				t.Fatal("Remove changed nothing")
			}
			if _, found := tb.Get(tc.id); found || tb.Remove(tc.id) {
				t.Fatal("a removed object is still there")
			}
			ok(t, tb.Reserve(o.Kind, "new", o.SandboxID, o.Name)) // its name is free
		})
	}
}

// TestImport: records of an older daemon are added unless their id or name
// is known; reservations and nameless ones are skipped.
func TestImport(t *testing.T) {
	tb := podWith(t)
	n := tb.Import([]Object{
		{ID: "q", Kind: Sandbox, Name: "podq", State: Running, Incarnation: "i"},
		{ID: "p", Kind: Sandbox, Name: "other", State: Exited},  // id known
		{ID: "x", Kind: Sandbox, Name: "pod", State: Exited},    // name known
		{ID: "y", Kind: Sandbox, Name: "pody", State: Reserved}, // never committed
		{ID: "z", Kind: Sandbox, State: Exited},                 // no name
	})
	if n != 1 || len(tb.List()) != 3 || get(t, tb, "q").State != Running || get(t, tb, "p").Name != "pod" {
		t.Fatalf("imported %d, table %+v", n, tb.List())
	}
}
