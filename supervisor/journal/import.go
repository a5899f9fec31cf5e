package journal

import (
	"bufio"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"

	"github.com/sirupsen/logrus"
)

// importSource returns the single-file journal to import into a journal
// without segments: this directory's own events.log (the layout before
// segments), else Options.Legacy (a v0.2 state dir's), else "".
func (j *Journal) importSource() string {
	for _, p := range []string{filepath.Join(j.dir, fileName), j.opts.Legacy} {
		if p == "" {
			continue
		}
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// importFile streams a single-file journal into segments (numbering v0.2
// records, skipping garbage as Open does) and leaves it in place. It is
// imported once: afterwards the directory has segments.
func (j *Journal) importFile(src string) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("open journal to import: %w", err)
	}
	defer f.Close()
	w := &segWriter{dir: j.dir, fs: j.opts.fs, per: j.opts.segmentRecords}
	var werr error
	l := j.newLoader(clockState{}, func(ev Event, _, _ int64, newEpoch bool) {
		if werr == nil {
			werr = w.write(ev, newEpoch)
		}
	})
	if err := l.read(f); err != nil {
		return errors.Join(fmt.Errorf("read journal to import %s: %w", src, err), w.abort())
	}
	l.summarise()
	if werr != nil {
		return errors.Join(fmt.Errorf("import %s: %w", src, werr), w.abort())
	}
	if err := w.finish(); err != nil {
		return fmt.Errorf("import %s: %w", src, err)
	}
	j.log.WithFields(logrus.Fields{"from": src, "events": w.total}).Info("journal: imported a single-file journal into segments; the old file is left in place")
	return nil
}

// segWriter writes events straight into segment files, sealing each full
// one (fsync, index). The last one is left without index: the active one.
// Used to import a journal and to build large journals for benchmarks.
type segWriter struct {
	dir   string
	fs    fileSystem
	per   int
	f     file
	bw    *bufio.Writer
	x     *indexer
	off   int64
	total int
	buf   []byte
}

func (w *segWriter) write(ev Event, newEpoch bool) error {
	if w.f == nil || w.x.sum.Count >= w.per {
		if err := w.rotate(ev.Seq); err != nil {
			return err
		}
	}
	var err error
	if w.buf, err = appendRecord(w.buf[:0], ev); err != nil {
		return err
	}
	if _, err := w.bw.Write(w.buf); err != nil {
		return err
	}
	w.x.add(ev, w.off, int64(len(w.buf)), newEpoch)
	w.off += int64(len(w.buf))
	w.total++
	return nil
}

func (w *segWriter) rotate(base uint64) error {
	if w.f != nil {
		if err := w.flushSync(); err != nil {
			return err
		}
		j := &Journal{dir: w.dir, opts: Options{fs: w.fs}}
		if err := j.writeIndex(w.x); err != nil {
			return err
		}
	}
	f, err := w.fs.OpenFile(filepath.Join(w.dir, segName(base, segLog)), os.O_RDWR|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("create journal segment: %w", err)
	}
	w.f, w.bw, w.x, w.off = f, bufio.NewWriterSize(f, 256<<10), newIndexer(base), 0
	return nil
}

func (w *segWriter) flushSync() error {
	err := w.bw.Flush()
	if err == nil {
		err = w.f.Sync()
	}
	return errors.Join(err, w.f.Close())
}

func (w *segWriter) finish() error {
	if w.f != nil {
		if err := w.flushSync(); err != nil {
			return err
		}
	}
	return w.fs.SyncDir(w.dir)
}

// abort removes what an import wrote, so that the next Open imports again.
func (w *segWriter) abort() error {
	if w.f != nil {
		w.f.Close()
	}
	sf, err := listSegments(w.dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, base := range sf.bases {
		errs = append(errs, w.fs.Remove(filepath.Join(w.dir, segName(base, segLog))))
		if sf.idx[base] {
			errs = append(errs, w.fs.Remove(filepath.Join(w.dir, segName(base, segIdx))))
		}
	}
	return errors.Join(errs...)
}

// Build writes a new journal in the empty directory dir holding evs as
// given, numbered from seq 1. Timestamps must strictly increase (one epoch).
// It writes segments directly, without the per-event costs of Append: for
// benchmarks and tools that need a large journal fast.
func Build(dir string, evs iter.Seq[Event]) (int, error) {
	id, err := newID()
	if err != nil {
		return 0, err
	}
	j := &Journal{dir: dir, opts: Options{fs: osFS{}}}
	if err := j.writeID(id); err != nil {
		return 0, err
	}
	w := &segWriter{dir: dir, fs: osFS{}, per: DefaultSegmentRecords}
	var seq uint64
	for ev := range evs {
		seq++
		ev.Seq, ev.Epoch = seq, 0
		ev.Timestamp = ev.Timestamp.Round(0).UTC()
		if err := w.write(ev, seq == 1); err != nil {
			return w.total, errors.Join(err, w.abort())
		}
	}
	return w.total, w.finish()
}
