package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/evjournal/containerd/bench/internal/harness"
	"github.com/evjournal/containerd/supervisor/journal"
)

// journal measures the journal package: appends per second under each sync
// policy against raw writes of the same bytes on the same file system, and
// the full replay of a journal of journalN events against reading its files.
// The files are on the disk (os.TempDir()), where fsync costs what it costs.
func (b *bench) journal() error {
	dir, err := os.MkdirTemp("", "ctrd-bench-journal-")
	if err != nil {
		return err
	}
	b.env.Defer(func() { os.RemoveAll(dir) })
	fs := fsName(dir)
	for _, pol := range []journal.SyncPolicy{journal.SyncAlways, journal.SyncBatch, journal.SyncNone} {
		if err := b.appendRate(dir, pol, fs); err != nil {
			return fmt.Errorf("append %s: %w", pol, err)
		}
	}
	return b.replay(dir, fs)
}

func quietLogger() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return logrus.NewEntry(l)
}

var benchEvent = journal.Event{Type: journal.TypeExit, ID: "bench-container-0001", Pid: "init", Status: 137, Incarnation: "1700000000000000000"}

// appendRate alternates the journal and the raw floor, two rounds each.
func (b *bench) appendRate(dir string, pol journal.SyncPolicy, fs string) error {
	each := b.cfg.appendTime / 2
	var jn, rn int
	var jt, rt time.Duration
	for round := 0; round < 2; round++ {
		for _, side := range []string{"journal", "raw"} {
			if round == 1 {
				side = map[string]string{"journal": "raw", "raw": "journal"}[side]
			}
			var n int
			var took time.Duration
			var err error
			if side == "journal" {
				n, took, err = journalAppends(filepath.Join(dir, "append.log"), pol, each)
				jn, jt = jn+n, jt+took
			} else {
				n, took, err = rawAppends(filepath.Join(dir, "raw.log"), pol, each)
				rn, rt = rn+n, rt+took
			}
			if err != nil {
				return err
			}
		}
	}
	jr, rr := float64(jn)/jt.Seconds(), float64(rn)/rt.Seconds()
	name := "journal_append_per_s_" + pol.String()
	b.rep.Add(harness.Figure{Name: name, Value: jr, Unit: "events/s",
		Floor: fmt.Sprintf("raw write(2) of the same line%s: %.0f/s (journal ÷ raw = %.2f)", syncNote(pol), rr, jr/rr),
		Note:  fmt.Sprintf("journal.Append (+ Commit every 32 appends, the loop's group commit), retain count 500, on %s", fs)})
	b.rep.Line(name+"_ratio_vs_raw", jr/rr, "ratio")
	return nil
}

func syncNote(pol journal.SyncPolicy) string {
	switch pol {
	case journal.SyncAlways:
		return " + fsync each"
	case journal.SyncBatch:
		return " + fsync every 32"
	}
	return ""
}

func journalAppends(path string, pol journal.SyncPolicy, d time.Duration) (int, time.Duration, error) {
	jdir, err := os.MkdirTemp(filepath.Dir(path), "append-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(jdir)
	j, err := journal.Open(jdir, journal.Options{Sync: pol, RetainCount: 500, Logger: quietLogger()})
	if err != nil {
		return 0, 0, err
	}
	defer j.Close()
	n := 0
	t0 := time.Now()
	for time.Since(t0) < d {
		if _, err := j.Append(benchEvent); err != nil {
			return 0, 0, err
		}
		if n++; n%32 == 0 {
			if err := j.Commit(); err != nil {
				return 0, 0, err
			}
		}
	}
	if err := j.Commit(); err != nil {
		return 0, 0, err
	}
	return n, time.Since(t0), nil
}

func rawAppends(path string, pol journal.SyncPolicy, d time.Duration) (int, time.Duration, error) {
	defer os.Remove(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	line := []byte(`{"type":"exit","id":"bench-container-0001","pid":"init","status":137,"timestamp":"2026-11-22T02:39:21.867921164Z","seq":123456,"incarnation":"1700000000000000000"}` + "\n")
	n := 0
	t0 := time.Now()
	for time.Since(t0) < d {
		if _, err := f.Write(line); err != nil {
			return 0, 0, err
		}
		n++
		if pol == journal.SyncAlways || (pol == journal.SyncBatch && n%32 == 0) {
			if err := f.Sync(); err != nil {
				return 0, 0, err
			}
		}
	}
	if pol == journal.SyncBatch {
		if err := f.Sync(); err != nil {
			return 0, 0, err
		}
	}
	return n, time.Since(t0), nil
}

// fsName names the file system type of dir for the notes.
func fsName(dir string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return dir
	}
	names := map[int64]string{0xEF53: "ext4", 0x01021994: "tmpfs", 0x58465342: "xfs", 0x9123683E: "btrfs", 0x794c7630: "overlayfs"}
	if n, ok := names[int64(st.Type)]; ok {
		return fmt.Sprintf("%s (%s)", dir, n)
	}
	return fmt.Sprintf("%s (fs 0x%x)", dir, st.Type)
}
