package objects

import (
	"testing"

	"github.com/evjournal/containerd/supervisor/journal"
)

func createdEv(kind Kind, id, sandbox, name string, s int) journal.Event {
	ev := CreatedEvent(Object{ID: id, Kind: kind, SandboxID: sandbox, Name: name})
	ev.Timestamp = at(s)
	return ev
}

// TestApply: each journaled event does to the table what the transition it
// records did; events replayed over a later state, of ids that are no
// object, of exec processes, or of types the table does not follow change
// nothing.
func TestApply(t *testing.T) {
	type check func(t *testing.T, tb *Table)
	state := func(id string, want State) check {
		return func(t *testing.T, tb *Table) {
			if o := get(t, tb, id); o.State != want {
				t.Fatalf("%s is %s, want %s", id, o.State, want)
			}
		}
	}
	cases := []struct {
		name    string
		setup   func(t *testing.T, tb *Table)
		ev      journal.Event
		changed bool
		check   check
	}{
		{"cri-created pod", nil, createdEv(Sandbox, "q", "", "podq", 7), true, func(t *testing.T, tb *Table) {
			o := get(t, tb, "q")
			if o.State != Created || o.Kind != Sandbox || o.Name != "podq" || o.CreatedAt != at(7).UnixNano() {
				t.Fatalf("%+v", o)
			}
			if err := tb.Reserve(Sandbox, "q2", "", "podq"); err == nil {
				t.Fatal("the name of a replayed object is free")
			}
		}},
		{"cri-created container", nil, createdEv(Container, "d", "p", "ctrd", 7), true, func(t *testing.T, tb *Table) {
			if o := get(t, tb, "d"); o.State != Created || o.Kind != Container || o.SandboxID != "p" || o.Name != "ctrd" {
				t.Fatalf("%+v", o)
			}
		}},
		{"cri-created over a reservation", func(t *testing.T, tb *Table) { ok(t, tb.Reserve(Sandbox, "q", "", "podq")) },
			createdEv(Sandbox, "q", "", "podq", 7), true, state("q", Created)},
		{"cri-created of a known object", nil, createdEv(Sandbox, "c", "", "other", 7), false, state("c", Created)},
		{"cri-created of a taken name", nil, createdEv(Sandbox, "q", "", "pod", 7), false, func(t *testing.T, tb *Table) {
			if _, found := tb.Get("q"); found {
				t.Fatal("an object with a taken name was added")
			}
		}},
		{"cri-created of an older daemon (no CRI part)", nil, journal.Event{Type: journal.TypeCRICreated, ID: "q", Timestamp: at(7)}, false, nil},
		{"start-container", nil, journal.Event{Type: journal.TypeStartContainer, ID: "c", Incarnation: "i1", Timestamp: at(7)}, true,
			func(t *testing.T, tb *Table) {
				if o := get(t, tb, "c"); o.State != Running || o.Incarnation != "i1" || o.StartedAt != at(7).UnixNano() || o.Pid != 0 {
					t.Fatalf("%+v", o)
				}
			}},
		{"start-container over running", func(t *testing.T, tb *Table) { running(t, tb, "c") },
			journal.Event{Type: journal.TypeStartContainer, ID: "c", Incarnation: "i1", Timestamp: at(7)}, false, nil},
		{"start-container over exited", func(t *testing.T, tb *Table) {
			running(t, tb, "c")
			tb.Exit("c", "", 0, at(3), "")
		}, journal.Event{Type: journal.TypeStartContainer, ID: "c", Incarnation: "inc-c", Timestamp: at(7)}, false, nil},
		{"start-container of a 0.2 container", nil, journal.Event{Type: journal.TypeStartContainer, ID: "x", Timestamp: at(7)}, false, nil},
		{"cri-start-failed", nil, func() journal.Event {
			ev := StartFailedEvent("c", "no such binary")
			ev.Timestamp = at(7)
			return ev
		}(), true, func(t *testing.T, tb *Table) {
			if o := get(t, tb, "c"); o.State != Exited || o.ExitCode != 128 || o.Reason != "StartError" ||
				o.Message != "no such binary" || o.FinishedAt != at(7).UnixNano() {
				t.Fatalf("%+v", o)
			}
		}},
		{"cri-start-failed without a message", nil, journal.Event{Type: journal.TypeCRIStartFailed, ID: "c", Timestamp: at(7)}, true,
			state("c", Exited)},
		{"cri-start-failed over running", func(t *testing.T, tb *Table) { running(t, tb, "c") },
			journal.Event{Type: journal.TypeCRIStartFailed, ID: "c", Timestamp: at(7)}, false, state("c", Running)},
		{"exit of init at its reap time", func(t *testing.T, tb *Table) { running(t, tb, "c") },
			journal.Event{Type: journal.TypeExit, ID: "c", Pid: "init", Status: 2, Incarnation: "inc-c", Timestamp: at(8), ExitedAt: at(7)}, true,
			func(t *testing.T, tb *Table) {
				if o := get(t, tb, "c"); o.State != Exited || o.ExitCode != 2 || o.FinishedAt != at(7).UnixNano() || o.Reason != "Error" {
					t.Fatalf("%+v", o)
				}
			}},
		{"exit of init, reap time unknown", func(t *testing.T, tb *Table) { running(t, tb, "c") },
			journal.Event{Type: journal.TypeExit, ID: "c", Pid: "init", Incarnation: "inc-c", Timestamp: at(8)}, true,
			func(t *testing.T, tb *Table) {
				if o := get(t, tb, "c"); o.FinishedAt != at(8).UnixNano() || o.Reason != "Completed" {
					t.Fatalf("%+v", o)
				}
			}},
		{"exit of an exec", func(t *testing.T, tb *Table) { running(t, tb, "c") },
			journal.Event{Type: journal.TypeExit, ID: "c", Pid: "probe", Status: 1, Incarnation: "inc-c", Timestamp: at(8)}, false, state("c", Running)},
		{"exit of another incarnation", func(t *testing.T, tb *Table) { running(t, tb, "c") },
			journal.Event{Type: journal.TypeExit, ID: "c", Pid: "init", Status: 1, Incarnation: "old", Timestamp: at(8)}, false, state("c", Running)},
		{"exit over exit", func(t *testing.T, tb *Table) {
			running(t, tb, "c")
			tb.Exit("c", "", 3, at(3), "")
		}, journal.Event{Type: journal.TypeExit, ID: "c", Pid: "init", Status: 1, Timestamp: at(8)}, false, func(t *testing.T, tb *Table) {
			if o := get(t, tb, "c"); o.ExitCode != 3 || o.FinishedAt != at(3).UnixNano() {
				t.Fatalf("%+v", o)
			}
		}},
		{"oom", func(t *testing.T, tb *Table) { running(t, tb, "c") },
			journal.Event{Type: journal.TypeOOM, ID: "c", Incarnation: "inc-c", Timestamp: at(8)}, true, func(t *testing.T, tb *Table) {
				if !get(t, tb, "c").OOMKilled {
					t.Fatal("not OOM killed")
				}
			}},
		{"oom of another incarnation", func(t *testing.T, tb *Table) { running(t, tb, "c") },
			journal.Event{Type: journal.TypeOOM, ID: "c", Incarnation: "old", Timestamp: at(8)}, false, nil},
		{"cri-deleted", nil, journal.Event{Type: journal.TypeCRIDeleted, ID: "c", Timestamp: at(8)}, true, func(t *testing.T, tb *Table) {
			if _, found := tb.Get("c"); found {
				t.Fatal("c is still there")
			}
			ok(t, tb.Reserve(Container, "c2", "p", "ctr"))
		}},
		{"cri-deleted of an unknown id", nil, journal.Event{Type: journal.TypeCRIDeleted, ID: "x", Timestamp: at(8)}, false, nil},
		{"pause", func(t *testing.T, tb *Table) { running(t, tb, "c") },
			journal.Event{Type: journal.TypePause, ID: "c", Timestamp: at(8)}, false, state("c", Running)},
		{"start-process", func(t *testing.T, tb *Table) { running(t, tb, "c") },
			journal.Event{Type: journal.TypeStartProcess, ID: "c", Pid: "e1", Timestamp: at(8)}, false, state("c", Running)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tb := podWith(t)
			if tc.setup != nil {
				tc.setup(t, tb)
			}
			before := durable(tb)
			tb.MarkClean()
			if got := tb.Apply(tc.ev); got != tc.changed {
				t.Fatalf("Apply reported changed=%v, want %v", got, tc.changed)
			}
			if tc.changed != tb.Dirty() {
				t.Fatalf("changed=%v but dirty=%v: a snapshot would be missed or taken for nothing", tc.changed, tb.Dirty())
			}
			if !tc.changed && !equalDurable(before, durable(tb)) {
				t.Fatalf("an event that changed nothing changed the table:\n%+v\nwas\n%+v", durable(tb), before)
			}
			if tc.check != nil {
				tc.check(t, tb)
			}
		})
	}
}

// durableView is what a restart must give back of a table: its visible
// objects, less the flags of requests under way (starting, removing: the
// requests die with the daemon) and the last cleanup error (not
// journaled), and which object holds each of their names.
type durableView struct {
	objs  []Object
	names map[string]string
}

func durable(tb *Table) durableView {
	v := durableView{objs: tb.List(), names: map[string]string{}}
	for i := range v.objs {
		o := &v.objs[i]
		o.Starting, o.Removing, o.CleanupError = false, false, ""
		v.names[o.Name] = tb.names[o.Name]
	}
	return v
}

func equalDurable(a, b durableView) bool {
	if len(a.objs) != len(b.objs) || len(a.names) != len(b.names) {
		return false
	}
	for i := range a.objs {
		if a.objs[i] != b.objs[i] {
			return false
		}
	}
	for k, v := range a.names {
		if b.names[k] != v {
			return false
		}
	}
	return true
}
