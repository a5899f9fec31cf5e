package objects

import (
	"fmt"
	"math/rand"
	"sort"
	"testing"
	"time"

	"github.com/evjournal/containerd/supervisor/journal"
)

// model drives a table the way the CRI service and the loop do, with random
// requests and process events, and records the events the loop journals
// for them, stamped as the journal stamps them.
type model struct {
	r      *rand.Rand
	tb     *Table
	events []journal.Event
	now    int // the journal's clock, in seconds since t0
	fresh  int // for new ids and incarnations
	// requests under way: begun, not finished
	starting, removing []string
	snaps              []snap
}

// snap is a snapshot as the loop takes it: once every event the table
// reflects is journaled.
type snap struct {
	data []byte
	seq  int
}

// stamp is the time of the next event: the journal's clock moves on.
func (m *model) stamp() time.Time {
	m.now++
	return at(m.now)
}

// journal records ev as journaled at ts.
func (m *model) journal(ev journal.Event, ts time.Time) {
	ev.Timestamp, ev.Seq = ts, uint64(len(m.events)+1)
	m.events = append(m.events, ev)
}

// pick is any id: of an object, of a reservation, or of nothing.
func (m *model) pick() string {
	ids := make([]string, 0, len(m.tb.objs)+1)
	for id := range m.tb.objs {
		ids = append(ids, id)
	}
	ids = append(ids, "nope")
	sort.Strings(ids)
	return ids[m.r.Intn(len(ids))]
}

// pickIn is mostly the id of an object in state st (requests and process
// events are mostly about those), sometimes any id.
func (m *model) pickIn(st State) string {
	var ids []string
	for id, o := range m.tb.objs {
		if o.State == st {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 || m.r.Intn(4) == 0 {
		return m.pick()
	}
	sort.Strings(ids)
	return ids[m.r.Intn(len(ids))]
}

// take removes a random id from l.
func (m *model) take(l *[]string) (string, bool) {
	if len(*l) == 0 {
		return "", false
	}
	i := m.r.Intn(len(*l))
	id := (*l)[i]
	*l = append((*l)[:i], (*l)[i+1:]...)
	return id, true
}

func (m *model) incarnation(id string) string {
	o, _ := m.tb.Get(id)
	return []string{o.Incarnation, o.Incarnation, "", "old"}[m.r.Intn(4)]
}

// step runs one random request or process event.
func (m *model) step() {
	m.fresh++
	switch m.r.Intn(12) {
	case 0:
		m.tb.Reserve(Sandbox, fmt.Sprintf("p%d", m.fresh), "", fmt.Sprintf("pod-%d", m.r.Intn(5)))
	case 1, 2:
		m.tb.Reserve(Container, fmt.Sprintf("c%d", m.fresh), m.pick(), fmt.Sprintf("ctr-%d", m.r.Intn(8)))
	case 3:
		m.tb.Release(m.pick())
	case 4:
		m.commit(m.pick())
	case 5:
		if id := m.pickIn(Created); m.tb.BeginStart(id) == nil {
			m.starting = append(m.starting, id)
		}
	case 6:
		m.finishStart()
	case 7:
		m.exit(m.pickIn(Running))
	case 8:
		id := m.pickIn(Running)
		inc := m.incarnation(id)
		m.tb.OOM(id, inc)
		m.journal(journal.Event{Type: journal.TypeOOM, ID: id, Incarnation: inc}, m.stamp())
	case 9:
		if id := m.pick(); func() bool { _, err := m.tb.BeginRemove(id); return err == nil }() {
			m.removing = append(m.removing, id)
		}
	case 10:
		m.finishRemove()
	case 11: // what the table does not follow: an exec's life, a pause
		id := m.pick()
		m.journal(journal.Event{Type: journal.TypeStartProcess, ID: id, Pid: "e1"}, m.stamp())
		m.journal(journal.Event{Type: journal.TypeExit, ID: id, Pid: "e1", Status: 1}, m.stamp())
		m.journal(journal.Event{Type: journal.TypePause, ID: id}, m.stamp())
	}
}

// commit is CommitObject: the table's Commit, or the cri-created applied as
// the loop applies what it emits; either way the event is journaled.
func (m *model) commit(id string) {
	o, found := m.tb.Get(id)
	if !found || o.State != Reserved {
		return
	}
	ts := m.stamp()
	ev := CreatedEvent(o)
	if m.r.Intn(2) == 0 {
		if err := m.tb.Commit(id, ts); err != nil {
			panic(err)
		}
	} else {
		ev.Timestamp = ts
		m.tb.Apply(ev)
	}
	m.journal(ev, ts)
}

// finishStart ends a start under way: the process runs, the create failed,
// or the supervisor refused it before running anything.
func (m *model) finishStart() {
	id, found := m.take(&m.starting)
	if !found {
		return
	}
	ts := m.stamp()
	switch m.r.Intn(4) {
	case 0, 1:
		inc := fmt.Sprintf("inc%d", m.fresh)
		m.tb.Started(id, inc, 0, ts)
		m.journal(journal.Event{Type: journal.TypeStartContainer, ID: id, Incarnation: inc}, ts)
	case 2:
		m.tb.StartFailed(id, "runc: exec failed", ts)
		m.journal(StartFailedEvent(id, "runc: exec failed"), ts)
	default:
		m.tb.AbortStart(id)
		m.now-- // nothing journaled
	}
}

// exit is an init's exit, of the object's incarnation or another, with its
// reap time or without.
func (m *model) exit(id string) {
	inc, ts := m.incarnation(id), m.stamp()
	status := []uint32{0, 1, 137, 255}[m.r.Intn(4)]
	ev := journal.Event{Type: journal.TypeExit, ID: id, Pid: "init", Status: status, Incarnation: inc}
	finished := ts
	if m.r.Intn(2) == 0 {
		ev.ExitedAt = ts.Add(-time.Millisecond)
		finished = ev.ExitedAt
	}
	m.tb.Exit(id, inc, status, finished, "")
	m.journal(ev, ts)
}

func (m *model) finishRemove() {
	id, found := m.take(&m.removing)
	if !found {
		return
	}
	if m.r.Intn(3) == 0 {
		m.tb.AbortRemove(id, "device or resource busy")
		return
	}
	m.tb.Remove(id)
	m.journal(journal.Event{Type: journal.TypeCRIDeleted, ID: id}, m.stamp())
}

// TestReplayEqualsLive: whatever happened, loading a snapshot taken at any
// point and applying the journal's events after it gives the table the
// loop had: what a restart (restore) shows kubelet is what it was shown
// before. Checked for many random histories.
func TestReplayEqualsLive(t *testing.T) {
	applied := map[string]int{} // events that changed the replayed table, by type
	for seed := int64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			m := &model{r: rand.New(rand.NewSource(seed)), tb: NewTable()}
			// live[i]: the table once events[:i] were journaled (zero
			// where a step journaled more than one event)
			live := []durableView{durable(m.tb)}
			for i := 0; i < 200; i++ {
				before := len(m.events)
				if m.r.Intn(6) == 0 { // now and then: whatever is under way
					data, err := m.tb.Snapshot("j", uint64(before))
					ok(t, err)
					m.snaps = append(m.snaps, snap{data: data, seq: before})
				}
				m.step()
				now := durable(m.tb)
				if len(m.events) == before && !equalDurable(now, live[before]) {
					t.Fatalf("step %d journaled nothing but changed what a restart shows:\n%+v\nwas\n%+v", i, now, live[before])
				}
				for len(live) < len(m.events)+1 {
					live = append(live, durableView{})
				}
				live[len(m.events)] = now
			}
			final := durable(m.tb)
			for _, s := range m.snaps {
				l, err := LoadSnapshot(s.data)
				ok(t, err)
				if l.Journal != "j" || l.Seq != uint64(s.seq) {
					t.Fatalf("snapshot of seq %d loaded as journal %q seq %d", s.seq, l.Journal, l.Seq)
				}
				for _, ev := range m.events[s.seq:] {
					l.Table.Apply(ev)
				}
				got := durable(l.Table)
				if !equalDurable(got, final) {
					t.Fatalf("snapshot at seq %d + the %d events after it:\n%+v\nlive:\n%+v", s.seq, len(m.events)-s.seq, got, final)
				}
				if len(l.Table.names) != len(got.objs) || l.Table.Len() != len(got.objs) {
					t.Fatalf("snapshot at seq %d: replayed table holds %d names and %d objects for %d visible objects",
						s.seq, len(l.Table.names), l.Table.Len(), len(got.objs))
				}
			}
			// The whole journal, from an empty table, agrees at every seq
			// where the live table was observed.
			tb := NewTable()
			for i, ev := range m.events {
				if tb.Apply(ev) {
					applied[ev.Type]++
				}
				if v := live[i+1]; v.names != nil && !equalDurable(durable(tb), v) {
					t.Fatalf("replay of events 1..%d:\n%+v\nlive:\n%+v", i+1, durable(tb), v)
				}
			}
		})
	}
	t.Logf("events that changed a table: %v", applied)
	// The histories went through every transition a journal records.
	for _, typ := range []string{journal.TypeCRICreated, journal.TypeStartContainer, journal.TypeCRIStartFailed,
		journal.TypeOOM, journal.TypeExit, journal.TypeCRIDeleted} {
		if applied[typ] < 10 {
			t.Errorf("only %d %s events changed a table: the random histories test little of it", applied[typ], typ)
		}
	}
}
