package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/bench/internal/harness"
	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/supervisor/journal"
)

// journal measures the journal package: appends per second under each sync
// policy against raw writes of the same bytes on the same file system, and
// replay of a journal of journalN events, plus the last 100 of them through
// a daemon's Events API. The files are on the disk (os.TempDir()), where
// fsync costs what it costs.
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

// replay builds a journal of journalN events, then times its full load
// (Open) against reading the raw file, Since for the last 100, and the last
// 100 through a daemon started on that journal.
func (b *bench) replay(dir, fs string) error {
	n := b.cfg.journalN
	path := filepath.Join(dir, "events.log")
	if err := buildJournal(path, n); err != nil {
		return err
	}
	var full, raw []float64
	for round := 0; round < 3; round++ {
		t, err := timed(func() error { return fullReplay(path, n) })
		if err != nil {
			return err
		}
		full = append(full, t.Seconds())
		t, err = timed(func() error { return rawRead(path, n) })
		if err != nil {
			return err
		}
		raw = append(raw, t.Seconds())
	}
	fm, rm := harness.Median(full), harness.Median(raw)
	b.rep.Add(harness.Figure{Name: "replay_full_1m_s", Value: fm, Unit: "s",
		Floor: fmt.Sprintf("read the file and count its lines: %.3f s (journal ÷ floor = %.1f)", rm, fm/rm),
		Note:  fmt.Sprintf("journal.Open of %d retained events (decode, checks) + After(0): median of 3, on %s", n, fs)})

	j, err := journal.Open(filepath.Dir(path), journal.Options{Sync: journal.SyncNone, Logger: quietLogger()})
	if err != nil {
		return err
	}
	all := j.After(0, "")
	from := all[len(all)-101].Timestamp
	var lat []float64
	for i := 0; i < 1000; i++ {
		t0 := time.Now()
		got := j.Since(from, "")
		sum := 0
		for _, ev := range got {
			sum += len(ev.ID)
		}
		lat = append(lat, ms(time.Since(t0)))
		if len(got) != 100 || sum == 0 {
			j.Close()
			return fmt.Errorf("journal Since returned %d events, want 100", len(got))
		}
	}
	j.Close()
	b.rep.Add(harness.Figure{Name: "replay_last100_of_1m_ms", Value: harness.Percentile(lat, 99), Unit: "ms", Target: "<= 5", Goal: 5, Max: true,
		Note: fmt.Sprintf("journal.Since(T of the 101st-last) over %d retained events: p99 of 1000 calls (median %.4f ms)", n, harness.Median(lat))})
	return b.replayThroughDaemon(path, n, from)
}

func buildJournal(path string, n int) error {
	j, err := journal.Open(filepath.Dir(path), journal.Options{Sync: journal.SyncNone, Logger: quietLogger()})
	if err != nil {
		return err
	}
	kinds := []string{journal.TypeStartContainer, journal.TypeExit, journal.TypePause, journal.TypeResume}
	for i := 0; i < n; i++ {
		ev := journal.Event{Type: kinds[i%len(kinds)], ID: fmt.Sprintf("container-%04d", i%1000), Incarnation: "1700000000000000000"}
		if ev.Type == journal.TypeExit {
			ev.Pid, ev.Status = "init", uint32(i%256)
		}
		if _, err := j.Append(ev); err != nil {
			j.Close()
			return err
		}
	}
	return j.Close()
}

func fullReplay(path string, n int) error {
	j, err := journal.Open(filepath.Dir(path), journal.Options{Sync: journal.SyncNone, Logger: quietLogger()})
	if err != nil {
		return err
	}
	defer j.Close()
	if got := len(j.After(0, "")); got != n {
		return fmt.Errorf("replayed %d events, want %d", got, n)
	}
	return nil
}

func rawRead(path string, n int) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if got := bytes.Count(data, []byte{'\n'}); got != n {
		return fmt.Errorf("%d lines, want %d", got, n)
	}
	return nil
}

// replayThroughDaemon starts a daemon whose state dir holds the journal
// (--retain-count 0 keeps all of it) and times stored-only replays of the
// last 100 events over gRPC.
func (b *bench) replayThroughDaemon(path string, n int, from time.Time) error {
	d, err := b.env.NewDaemon("d-replay", "--retain-count", "0")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(d.StateDir, 0o711); err != nil {
		return err
	}
	if err := fixture.CopyFile(path, filepath.Join(d.StateDir, "events.log"), 0o600); err != nil {
		return err
	}
	startT, err := timed(d.Start)
	if err != nil {
		return err
	}
	defer d.Kill()
	ctx := context.Background()
	var lat []float64
	for i := 0; i < 200; i++ {
		t0 := time.Now()
		st, err := d.Client.Events(ctx, &types.EventsRequest{Timestamp: timestamppb.New(from), StoredOnly: true})
		if err != nil {
			return err
		}
		got := 0
		for {
			if _, err := st.Recv(); err != nil {
				if err == io.EOF {
					break
				}
				return err
			}
			got++
		}
		lat = append(lat, ms(time.Since(t0)))
		if got != 100 {
			return fmt.Errorf("replayed %d events, want 100", got)
		}
	}
	b.rep.Add(harness.Figure{Name: "replay_last100_of_1m_grpc_ms", Value: harness.Percentile(lat, 99), Unit: "ms",
		Note: fmt.Sprintf("Events{timestamp, storedOnly} for the last 100 of %d events, through the daemon's gRPC API: p99 of 200 (median %.2f ms); that daemon started in %.2f s on this journal",
			n, harness.Median(lat), startT.Seconds())})
	b.rep.Line("daemon_start_1m_journal_s", startT.Seconds(), "s")
	return nil
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
