package reliability

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/evjournal/containerd/supervisor/journal"
)

// segmentStates starts a daemon with --retain-count 10 on the files a crash
// leaves at each step of sealing a full segment and of removing it by
// retention: it must serve the last 10 acknowledged events, remove leftover
// temp files and an index left without its segment, and leave only valid
// records.
func (f *faults) segmentStates() error {
	const retain, tail = 10, 20
	per := journal.DefaultSegmentRecords
	evs, files, err := buildSegments(f.s.env.Dir, per+tail)
	if err != nil {
		return err
	}
	seg2 := journal.SegmentFile(uint64(per) + 1)
	idx1 := strings.TrimSuffix(seg1, ".log") + ".idx"
	const temp = ".seg-tmp-123456"
	pick := func(names ...string) map[string][]byte {
		m := map[string][]byte{"journal.id": files["journal.id"]}
		for _, n := range names {
			m[n] = files[n]
		}
		return m
	}
	with := func(m map[string][]byte, name string, data []byte) map[string][]byte { m[name] = data; return m }
	cases := []struct {
		name  string
		files map[string][]byte
		want  []journal.Event
	}{
		{"segment full, index half written", with(pick(seg1), temp, files[idx1][:len(files[idx1])/2]), evs[per-retain : per]},
		{"index in place, next segment not created", pick(seg1, idx1), evs[per-retain : per]},
		{"next segment created empty", with(pick(seg1, idx1), seg2, nil), evs[per-retain : per]},
		{"retention about to remove the old segment", pick(seg1, idx1, seg2), evs[len(evs)-retain:]},
		{"retention removed the log, not the index", pick(idx1, seg2), evs[len(evs)-retain:]},
	}
	saved := f.d.Extra
	f.d.Extra = []string{"--retain-count", fmt.Sprint(retain)}
	defer func() { f.d.Extra = saved }()
	failures := 0
	for _, c := range cases {
		if err := f.segmentCase(c.files, c.want, temp, idx1); err != nil {
			failures++
			f.s.cfg.Logf("segment crash state, %s: %v", c.name, err)
		}
	}
	f.d.Kill()
	f.s.line("segment_crash_states", float64(len(cases)), "cases")
	f.s.zero("segment_crash_failures", failures, "cases")
	return nil
}

func (f *faults) segmentCase(files map[string][]byte, want []journal.Event, temp, idx1 string) error {
	got, err := f.replayed(files)
	if err == nil {
		err = sameEvents(got, want)
	}
	if err != nil {
		return err
	}
	if _, serr := os.Stat(filepath.Join(f.d.StateDir, temp)); serr == nil {
		return fmt.Errorf("leftover %s not removed", temp)
	}
	_, logErr := os.Stat(filepath.Join(f.d.StateDir, seg1))
	if _, idxErr := os.Stat(filepath.Join(f.d.StateDir, idx1)); idxErr == nil && logErr != nil {
		return fmt.Errorf("index %s kept without its segment", idx1)
	}
	if n := badJournalLines(f.d.StateDir); n != 0 {
		return fmt.Errorf("the journal holds %d invalid lines", n)
	}
	return nil
}

// buildSegments writes a journal of n events with journal.Build and returns
// its events and every file it wrote, by name.
func buildSegments(dir string, n int) ([]journal.Event, map[string][]byte, error) {
	jdir, err := os.MkdirTemp(dir, "segments-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(jdir)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	evs := make([]journal.Event, n)
	for i := range evs {
		evs[i] = journal.Event{Type: journal.TypeExit, ID: fmt.Sprintf("c%d", i), Pid: "init", Status: uint32(i % 256),
			Incarnation: "1", Timestamp: base.Add(time.Duration(i) * time.Microsecond), Seq: uint64(i + 1)}
	}
	if _, err := journal.Build(jdir, slices.Values(evs)); err != nil {
		return nil, nil, err
	}
	entries, err := os.ReadDir(jdir)
	if err != nil {
		return nil, nil, err
	}
	files := map[string][]byte{}
	for _, e := range entries {
		if files[e.Name()], err = os.ReadFile(filepath.Join(jdir, e.Name())); err != nil {
			return nil, nil, err
		}
	}
	return evs, files, nil
}

// badJournalLines counts the invalid lines of every segment in dir.
func badJournalLines(dir string) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 1
	}
	bad := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "seg-") && strings.HasSuffix(e.Name(), ".log") {
			bad += badLines(filepath.Join(dir, e.Name()))
		}
	}
	return bad
}
