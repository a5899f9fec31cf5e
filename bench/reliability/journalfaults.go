package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/bench/internal/harness"
	"github.com/evjournal/containerd/supervisor/journal"
)

// journalFaults starts the daemon on damaged journals: a torn tail at every
// byte offset of the last records of the newest segment, NUL-filled tails,
// the files a crash leaves at each step of a segment seal and of retention,
// and a daemon SIGKILLed under load with a retain count. Each time it must
// start and replay every complete (acknowledged) record, and nothing else.
func (s *Suite) journalFaults() error {
	d, err := s.env.NewDaemon("journal", "--retain-count", "0")
	if err != nil {
		return err
	}
	jf := &faults{s: s, d: d}
	if err := jf.torn(); err != nil {
		return fmt.Errorf("torn tail: %w", err)
	}
	if err := jf.nulTail(); err != nil {
		return fmt.Errorf("NUL tail: %w", err)
	}
	if err := jf.segmentStates(); err != nil {
		return fmt.Errorf("segment states: %w", err)
	}
	if err := s.compactionKills(); err != nil {
		return fmt.Errorf("compaction kills: %w", err)
	}
	return nil
}

type faults struct {
	s *Suite
	d *harness.Daemon
}

// written is a journal's only segment made through the journal package: its
// events, bytes and the end offset of each record.
type written struct {
	evs  []journal.Event
	data []byte
	ends []int
}

// seg1 is the first (and, below 16384 events, only) segment of a journal.
var seg1 = journal.SegmentFile(1)

func writeJournal(dir string, n int) (written, error) {
	jdir, err := os.MkdirTemp(dir, "journal-")
	if err != nil {
		return written{}, err
	}
	defer os.RemoveAll(jdir)
	j, err := journal.Open(jdir, journal.Options{Sync: journal.SyncNone, Logger: quiet()})
	if err != nil {
		return written{}, err
	}
	var w written
	for i := 0; i < n; i++ {
		ev := journal.Event{Type: journal.TypeStartContainer, ID: fmt.Sprintf("c%d", i), Incarnation: "1"}
		if i%2 == 1 {
			ev = journal.Event{Type: journal.TypeExit, ID: fmt.Sprintf("c%d", i-1), Pid: "init", Status: uint32(i), Incarnation: "1"}
		}
		stored, err := j.Append(ev)
		if err != nil {
			j.Close()
			return written{}, err
		}
		w.evs = append(w.evs, stored)
	}
	if err := j.Close(); err != nil {
		return written{}, err
	}
	if w.data, err = os.ReadFile(filepath.Join(jdir, seg1)); err != nil {
		return written{}, err
	}
	for i, b := range w.data {
		if b == '\n' {
			w.ends = append(w.ends, i+1)
		}
	}
	if len(w.ends) != n {
		return written{}, fmt.Errorf("journal of %d events has %d lines", n, len(w.ends))
	}
	return w, nil
}

// startOn starts the daemon on a fresh state dir holding exactly files.
func (f *faults) startOn(files map[string][]byte) error {
	f.d.Kill()
	if err := os.RemoveAll(f.d.StateDir); err != nil {
		return err
	}
	if err := os.MkdirAll(f.d.StateDir, 0o711); err != nil {
		return err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(f.d.StateDir, name), data, 0o600); err != nil {
			return err
		}
	}
	return f.d.Start()
}

// replayed starts the daemon on files and returns its stored-only replay.
func (f *faults) replayed(files map[string][]byte) ([]*types.Event, error) {
	if err := f.startOn(files); err != nil {
		return nil, fmt.Errorf("daemon did not start: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return harness.StoredEvents(ctx, f.d.Client)
}

// sameEvents reports how got differs from want (exactly, in order).
func sameEvents(got []*types.Event, want []journal.Event) error {
	if len(got) != len(want) {
		return fmt.Errorf("replayed %d events, want %d", len(got), len(want))
	}
	for i := range want {
		if err := sameEvent(got[i], want[i]); err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
	}
	return nil
}

func sameEvent(g *types.Event, w journal.Event) error {
	if g.Type != w.Type || g.Id != w.ID || g.Pid != w.Pid || g.Status != w.Status || g.Seq != w.Seq ||
		!g.Timestamp.AsTime().Equal(w.Timestamp) {
		return fmt.Errorf("got %s %s %s %d seq %d %s, want %s %s %s %d seq %d %s", g.Type, g.Id, g.Pid, g.Status, g.Seq,
			g.Timestamp.AsTime().Format(time.RFC3339Nano), w.Type, w.ID, w.Pid, w.Status, w.Seq, w.Timestamp.Format(time.RFC3339Nano))
	}
	return nil
}

// torn cuts the journal at every TornStride-th byte offset of its last two
// records (both ends always included).
func (f *faults) torn() error {
	w, err := writeJournal(f.s.env.Dir, 8)
	if err != nil {
		return err
	}
	from := w.ends[len(w.ends)-3]
	var offsets []int
	for k := from; k <= len(w.data); k += f.s.cfg.TornStride {
		offsets = append(offsets, k)
	}
	if offsets[len(offsets)-1] != len(w.data) {
		offsets = append(offsets, len(w.data))
	}
	failures := 0
	for _, k := range offsets {
		complete := 0
		for complete < len(w.ends) && w.ends[complete] <= k {
			complete++
		}
		got, err := f.replayed(map[string][]byte{seg1: w.data[:k]})
		if err == nil {
			err = sameEvents(got, w.evs[:complete])
		}
		if err != nil {
			failures++
			f.s.cfg.Logf("torn tail at byte %d of %d: %v", k, len(w.data), err)
		}
	}
	f.s.line("torn_tail_offsets_tested", float64(len(offsets)), "offsets")
	f.s.zero("torn_tail_failures", failures, "offsets")
	return f.appendAfterCut(w)
}

// appendAfterCut: on a journal cut mid-record, a new event must follow the
// last complete one (next seq) and the file must hold only whole records.
func (f *faults) appendAfterCut(w written) error {
	cut := w.ends[len(w.ends)-2] + 7
	if _, err := f.replayed(map[string][]byte{seg1: w.data[:cut]}); err != nil {
		return err
	}
	bundle, err := f.s.env.Bundle("journal-sleep")
	if err != nil {
		return err
	}
	ctx := context.Background()
	if _, err := f.d.Client.CreateContainer(ctx, &types.CreateContainerRequest{Id: f.s.env.ID("after-cut"), BundlePath: bundle}); err != nil {
		return err
	}
	defer killAndWait(f.d, f.s.env.ID("after-cut"))
	got, err := harness.StoredEvents(ctx, f.d.Client)
	if err != nil {
		return err
	}
	want := w.evs[len(w.evs)-2].Seq + 1 // the last complete record is the 7th of 8
	bad := 0
	if len(got) == 0 || got[len(got)-1].Type != "start-container" || got[len(got)-1].Seq != want {
		bad++
		f.s.cfg.Logf("after a cut, the new event is %v, want start-container seq %d", last(got), want)
	}
	if n := badJournalLines(f.d.StateDir); n != 0 {
		bad++
		f.s.cfg.Logf("after a cut and an append, %d invalid lines in the journal", n)
	}
	f.s.zero("torn_tail_append_failures", bad, "cases")
	return nil
}

func last(evs []*types.Event) *types.Event {
	if len(evs) == 0 {
		return nil
	}
	return evs[len(evs)-1]
}

// nulTail: what a crash leaves when blocks were allocated but not written.
func (f *faults) nulTail() error {
	w, err := writeJournal(f.s.env.Dir, 8)
	if err != nil {
		return err
	}
	n := len(w.ends)
	lastLen := w.ends[n-1] - w.ends[n-2]
	cases := []struct {
		name     string
		data     []byte
		complete int
	}{
		{"4 KiB of NULs after the last record", cat(w.data, zeros(4096)), n},
		{"last record replaced by NULs", cat(w.data[:w.ends[n-2]], zeros(lastLen)), n - 1},
		{"last record half written, then NULs", cat(w.data[:w.ends[n-2]+lastLen/2], zeros(4096)), n - 1},
		{"NULs before a last record", cat(w.data[:w.ends[n-2]], zeros(512), w.data[w.ends[n-2]:]), n},
		{"1 MiB of NULs, no newline", cat(w.data, zeros(1<<20)), n},
	}
	failures := 0
	for _, c := range cases {
		got, err := f.replayed(map[string][]byte{seg1: c.data})
		if err == nil {
			err = sameEvents(got, w.evs[:c.complete])
		}
		if err != nil {
			failures++
			f.s.cfg.Logf("NUL tail, %s: %v", c.name, err)
		}
	}
	f.s.line("nul_tail_cases", float64(len(cases)), "cases")
	f.s.zero("nul_tail_failures", failures, "cases")
	return nil
}

func zeros(n int) []byte { return make([]byte, n) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// badLines counts the complete lines of a journal file that do not decode
// as an event with a type and a timestamp.
func badLines(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 1
	}
	bad := 0
	for _, line := range bytes.Split(data, []byte{'\n'}) {
		if len(line) == 0 {
			continue
		}
		var ev journal.Event
		if json.Unmarshal(line, &ev) != nil || ev.Type == "" || ev.Timestamp.IsZero() {
			bad++
		}
	}
	return bad
}

// compactionKills SIGKILLs a daemon with --retain-count 16 (a compaction
// every ~64 events) while pause/resume produce events; after each restart
// the last 16 acknowledged events (seen by a live subscriber) must be in
// the replay, unchanged.
func (s *Suite) compactionKills() error {
	const retain = 16
	d, bundle, err := s.startWithBundle("compact-sleep", "compact", "--retain-count", fmt.Sprint(retain))
	if err != nil {
		return err
	}
	ctx := context.Background()
	ids := []string{s.env.ID("cp0"), s.env.ID("cp1"), s.env.ID("cp2")}
	for _, id := range ids {
		if _, err := d.Client.CreateContainer(ctx, &types.CreateContainerRequest{Id: id, BundlePath: bundle}); err != nil {
			return err
		}
	}
	var gate sync.RWMutex // the generator holds it for reading; a restart for writing
	acked := map[uint64]*types.Event{}
	var ackMu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	harness.Repeat(len(ids), stop, &wg, func(i int) bool {
		gate.RLock()
		c := d.Client
		for _, st := range []string{"paused", "running"} {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			c.UpdateContainer(cctx, &types.UpdateContainerRequest{Id: ids[i], Status: st})
			cancel()
		}
		gate.RUnlock()
		time.Sleep(time.Millisecond)
		return true
	})
	defer func() { close(stop); wg.Wait() }()
	follow := func() (*harness.Stream, error) {
		st, err := harness.Subscribe(ctx, d.Client, harness.FromStart(false), 1<<16)
		if err != nil {
			return nil, err
		}
		go func() {
			for r := range st.C {
				ackMu.Lock()
				acked[r.Ev.Seq] = r.Ev
				ackMu.Unlock()
			}
		}()
		return st, nil
	}
	sub, err := follow()
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	lost, unreadable, kills := 0, 0, 0
	for kills < s.cfg.CompactKills {
		time.Sleep(time.Duration(200+rng.Intn(1300)) * time.Millisecond)
		gate.Lock()
		d.Kill()
		kills++
		sub.Close()
		ackMu.Lock()
		var maxAck uint64
		for seq := range acked {
			maxAck = max(maxAck, seq)
		}
		ackMu.Unlock()
		if err := d.Start(); err != nil {
			gate.Unlock()
			return fmt.Errorf("restart after kill %d: %w", kills, err)
		}
		got, err := harness.StoredEvents(ctx, d.Client)
		if err != nil {
			unreadable++
		}
		bySeq := map[uint64]*types.Event{}
		for i, ev := range got {
			bySeq[ev.Seq] = ev
			if i > 0 && ev.Seq != got[i-1].Seq+1 {
				unreadable++
				s.cfg.Logf("compaction kill %d: replay seq %d after %d", kills, ev.Seq, got[i-1].Seq)
			}
		}
		unreadable += badJournalLines(d.StateDir)
		// Retention counts from the end of the file, which may hold events
		// journaled but not yet seen by our subscriber: the acknowledged
		// events that must be there are those among the last `retain`.
		var end uint64
		if len(got) > 0 {
			end = got[len(got)-1].Seq
		}
		if end < maxAck {
			lost += int(maxAck - end)
			s.cfg.Logf("compaction kill %d: journal ends at seq %d, but seq %d was acknowledged", kills, end, maxAck)
		}
		ackMu.Lock()
		for seq := maxAck; seq > 0 && seq+retain > end; seq-- {
			a, ok := acked[seq]
			if !ok {
				continue
			}
			g, ok := bySeq[seq]
			if !ok || g.Type != a.Type || g.Id != a.Id || !g.Timestamp.AsTime().Equal(a.Timestamp.AsTime()) {
				lost++
				s.cfg.Logf("compaction kill %d: acknowledged event seq %d (%s %s) missing or changed after restart", kills, seq, a.Type, a.Id)
			}
		}
		ackMu.Unlock()
		if sub, err = follow(); err != nil {
			gate.Unlock()
			return err
		}
		gate.Unlock()
	}
	sub.Close()
	s.line("compaction_kills", float64(kills), "kills")
	s.zero("compaction_lost_events", lost, "events")
	s.zero("compaction_journal_unreadable", unreadable, "records")
	return nil
}

// killAndWait SIGKILLs a container's init and waits until the daemon no
// longer lists it.
func killAndWait(d *harness.Daemon, id string) {
	ctx := context.Background()
	d.Client.Signal(ctx, &types.SignalRequest{Id: id, Pid: "init", Signal: uint32(syscall.SIGKILL)})
	for i := 0; i < 200; i++ {
		if _, err := d.Client.State(ctx, &types.StateRequest{Id: id}); err != nil {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
}
