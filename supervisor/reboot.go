package supervisor

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/evjournal/containerd/internal/atomicfile"
	"github.com/evjournal/containerd/supervisor/journal"
)

// After a reboot the state dir (on /run, a tmpfs) is empty while the
// journal (on persistent storage) says some containers were running. Each
// of them gets exactly one exit with status 255 (its real status is
// unknowable), execs first, journaled, so that a client rebuilding its view
// from the journal learns they are gone.
//
// A reboot is told by the kernel's boot id, kept in the journal dir once
// the exits of that boot are journaled. The file is written only after
// they are committed, and the exits carry the container's incarnation: a
// crash before the file is written makes the next start look again, and
// find those exits already in the journal. Only a start in a new boot
// reads the whole journal (newest first); one without the file (a new
// journal, or one of an older daemon) records the boot id and reads
// nothing. A container whose start-container was trimmed by retention is
// not found.
const bootIDFile = "containerd.boot_id"

// bootIDPath is where the kernel says which boot this is.
const bootIDPath = "/proc/sys/kernel/random/boot_id"

// lostContainer is a container the journal says was running.
type lostContainer struct {
	id, incarnation string
	execs           []string // started and not exited, oldest first
}

// exitLostContainers journals the exits of the containers lost in a reboot:
// those open in the journal and absent from the state dir (present). Runs
// during restore, on the loop's behalf.
func (s *Supervisor) exitLostContainers(present map[string]bool) {
	b, err := os.ReadFile(bootIDPath)
	boot := strings.TrimSpace(string(b))
	if err != nil || boot == "" {
		s.log.WithError(err).Warn("restore: cannot read the boot id; containers lost in a reboot are not looked for")
		return
	}
	path := filepath.Join(s.journalDir, bootIDFile)
	last, err := os.ReadFile(path)
	switch {
	case err == nil && strings.TrimSpace(string(last)) == boot:
		return // same boot: every container that ran is in the state dir
	case err == nil:
		for _, c := range s.lostInJournal(present) {
			s.exitLost(c)
		}
	case !errors.Is(err, os.ErrNotExist):
		s.log.WithError(err).Warn("restore: cannot read the last boot id")
		return
	}
	s.afterCommit(func() {
		if err := atomicfile.Write(path, []byte(boot+"\n"), 0o600); err != nil {
			s.log.WithError(err).Warn("restore: cannot record the boot id; the next start looks for lost containers again")
		}
	})
}

func (s *Supervisor) exitLost(c lostContainer) {
	s.log.WithField("container", c.id).WithField("execs", len(c.execs)).
		Warn("restore: container running before a reboot is gone; its exit is journaled with status 255 (real status unknowable)")
	for _, pid := range c.execs {
		s.emit(journal.Event{Type: journal.TypeExit, ID: c.id, Pid: pid, Status: 255, Incarnation: c.incarnation})
	}
	s.emit(journal.Event{Type: journal.TypeExit, ID: c.id, Pid: "init", Status: 255, Incarnation: c.incarnation})
}

// lostInJournal reads the journal newest first and returns the containers
// whose latest start-container has no init exit after it, except the ids
// present in the state dir, oldest start first.
func (s *Supervisor) lostInJournal(present map[string]bool) []lostContainer {
	decided := map[string]bool{}
	exited := map[string]map[string]bool{} // exec exits seen, not yet matched with their start
	execs := map[string][]string{}         // execs started and not exited, newest first
	var lost []lostContainer
	b := s.journal.Backward()
	for {
		ev, err := b.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.log.WithError(err).Warn("restore: reading the journal for containers lost in a reboot")
			}
			break
		}
		if decided[ev.ID] || present[ev.ID] {
			continue
		}
		switch {
		case ev.Type == journal.TypeExit && ev.Pid == "init":
			decided[ev.ID] = true
		case ev.Type == journal.TypeExit:
			if exited[ev.ID] == nil {
				exited[ev.ID] = map[string]bool{}
			}
			exited[ev.ID][ev.Pid] = true
		case ev.Type == journal.TypeStartProcess:
			if exited[ev.ID][ev.Pid] {
				delete(exited[ev.ID], ev.Pid)
			} else {
				execs[ev.ID] = append(execs[ev.ID], ev.Pid)
			}
		case ev.Type == journal.TypeStartContainer:
			decided[ev.ID] = true
			lost = append(lost, lostContainer{id: ev.ID, incarnation: ev.Incarnation, execs: reversed(execs[ev.ID])})
		}
	}
	return reversed(lost)
}

func reversed[T any](in []T) []T {
	out := make([]T, len(in))
	for i, v := range in {
		out[len(in)-1-i] = v
	}
	return out
}
