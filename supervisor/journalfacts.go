package supervisor

import (
	"errors"
	"io"
	"strings"
	"time"

	"github.com/evjournal/containerd/supervisor/journal"
)

// journalFacts is what restore needs from the journal about the containers
// found in the state dir. It is read newest first and only as far back as
// the start-container of each of them: a restart does not read a journal of
// millions of events (nothing at all when there is no container).
type journalFacts struct {
	exits  map[string]bool // published exits, by procKey
	starts map[string]bool // published start-container/start-process, by procKey
	// incarnations is the incarnation of each id's last start-container,
	// for a container whose state.json must be rebuilt.
	incarnations map[string]string
	oldest       time.Time // of the oldest event retained; zero if none
}

// factsWanted names the start-container events the backward read must
// reach, by id and incarnation ("" for the id's latest, when the state
// could not be read or has no incarnation). Every fact about an
// incarnation comes after its start-container.
type factsWanted map[string]bool

func wantKey(id, incarnation string) string { return id + "\x00" + incarnation }

func wanted(loads []loaded, retired []Container) factsWanted {
	w := factsWanted{}
	for _, l := range loads {
		inc := ""
		if l.err == nil {
			inc = l.c.Incarnation()
		}
		w[wantKey(l.id, inc)] = true
	}
	for _, c := range retired {
		w[wantKey(c.ID(), c.Incarnation())] = true
	}
	return w
}

func (w factsWanted) ids() map[string]bool {
	ids := map[string]bool{}
	for k := range w {
		ids[k[:strings.IndexByte(k, 0)]] = true
	}
	return ids
}

// reached records a start-container; it reports whether nothing more is wanted.
func (w factsWanted) reached(ev journal.Event) bool {
	if ev.Type == journal.TypeStartContainer {
		delete(w, wantKey(ev.ID, ev.Incarnation))
		delete(w, wantKey(ev.ID, ""))
	}
	return len(w) == 0
}

func (s *Supervisor) readJournalFacts(w factsWanted) journalFacts {
	f := journalFacts{exits: map[string]bool{}, starts: map[string]bool{}, incarnations: map[string]string{}}
	if oldest, ok := s.journal.Oldest(); ok {
		f.oldest = oldest.Timestamp
	}
	ids := w.ids()
	b := s.journal.Backward()
	for len(w) > 0 {
		ev, err := b.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.log.WithError(err).Warn("restore: reading the journal")
			}
			break
		}
		if ids[ev.ID] {
			f.add(ev)
			w.reached(ev)
		}
	}
	return f
}

// add records ev; events come newest first.
func (f *journalFacts) add(ev journal.Event) {
	if _, seen := f.incarnations[ev.ID]; !seen && ev.Type == journal.TypeStartContainer {
		f.incarnations[ev.ID] = ev.Incarnation
	}
	switch {
	case ev.Incarnation == "":
	case ev.Type == journal.TypeExit:
		f.exits[procKey(ev.ID, ev.Pid, ev.Incarnation)] = true
	case ev.Type == journal.TypeStartContainer:
		f.starts[procKey(ev.ID, "init", ev.Incarnation)] = true
	case ev.Type == journal.TypeStartProcess:
		f.starts[procKey(ev.ID, ev.Pid, ev.Incarnation)] = true
	}
}

// scanJournal streams every served event to fn, oldest first, until fn
// returns false. Safe from any goroutine.
func (s *Supervisor) scanJournal(fn func(journal.Event) bool) {
	r := s.journal.After(0, "")
	defer r.Close()
	for {
		ev, err := r.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.log.WithError(err).Warn("reading the journal")
			}
			return
		}
		if !fn(ev) {
			return
		}
	}
}
