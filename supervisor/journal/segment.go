package journal

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// On disk a journal is a directory of segments. Segment N holds the events
// from seq N on, one JSON object a line, in seg-<N, 20 digits>.log. Once
// full it is sealed: fsynced, then its index seg-<N>.idx is written (temp,
// fsync, rename) and never changes again; the newest segment has no index
// and is the one appended to. Retention removes whole sealed segments.
const (
	segPrefix = "seg-"
	segLog    = ".log"
	segIdx    = ".idx"
	// DefaultSegmentRecords is how many events a segment holds before it is
	// sealed: the events the active segment keeps in memory (a few MiB) and
	// what Open decodes of the journal, whatever its length.
	DefaultSegmentRecords = 16384
	// markEvery is the spacing of the seek marks of an index: a seek decodes
	// at most this many records before the one it wants.
	markEvery = 128
)

// SegmentFile names the log file of the segment whose first seq is first;
// a new journal's first segment is SegmentFile(1). For tools and tests that
// look at the files.
func SegmentFile(first uint64) string { return segName(first, segLog) }

func segName(first uint64, ext string) string {
	return fmt.Sprintf("%s%020d%s", segPrefix, first, ext)
}

// parseSegName returns the first seq of a segment file name and its kind.
func parseSegName(name string) (uint64, string, bool) {
	ext := filepath.Ext(name)
	if !strings.HasPrefix(name, segPrefix) || (ext != segLog && ext != segIdx) {
		return 0, "", false
	}
	n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, segPrefix), ext), 10, 64)
	if err != nil || len(name) != len(segName(n, ext)) {
		return 0, "", false
	}
	return n, ext, true
}

// summary is the first line of an index: what Open keeps of a sealed
// segment. Raw timestamps; MinTS and MaxTS bound every record's.
type summary struct {
	Base       uint64    `json:"base"` // first seq from the file name
	FirstSeq   uint64    `json:"first_seq"`
	LastSeq    uint64    `json:"last_seq"`
	Count      int       `json:"count"`
	Size       int64     `json:"size"`
	FirstTS    time.Time `json:"first_ts"`
	LastTS     time.Time `json:"last_ts"`
	FirstEpoch uint32    `json:"first_epoch"`
	LastEpoch  uint32    `json:"last_epoch"`
	MinTS      time.Time `json:"min_ts"`
	MaxTS      time.Time `json:"max_ts"`
	// Epochs are the epochs that start in this segment (its first record
	// starts one when the segment is the first of the journal).
	Epochs []epochJSON `json:"epochs,omitempty"`
}

type epochJSON struct {
	Epoch    uint32    `json:"epoch"`
	FirstSeq uint64    `json:"first_seq"`
	FirstTS  time.Time `json:"first_ts"`
}

// mark is a seek point: the record with Seq starts at Off.
type mark struct {
	Seq   uint64
	Off   int64
	TS    time.Time
	Epoch uint32
}

// sealed is a sealed segment as Open and readers know it.
type sealed struct {
	dir string
	sum summary
}

func (s sealed) logPath() string { return filepath.Join(s.dir, segName(s.sum.Base, segLog)) }
func (s sealed) idxPath() string { return filepath.Join(s.dir, segName(s.sum.Base, segIdx)) }

// indexer accumulates a segment's summary and marks while its records are
// written or scanned.
type indexer struct {
	sum   summary
	marks []mark
}

func newIndexer(base uint64) *indexer { return &indexer{sum: summary{Base: base}} }

// add records ev, whose line starts at off and is n bytes long.
func (x *indexer) add(ev Event, off, n int64, newEpoch bool) {
	s := &x.sum
	if s.Count == 0 {
		s.FirstSeq, s.FirstTS, s.MinTS, s.MaxTS = ev.Seq, ev.Timestamp, ev.Timestamp, ev.Timestamp
		s.FirstEpoch = ev.Epoch
	}
	if s.Count%markEvery == 0 {
		x.marks = append(x.marks, mark{ev.Seq, off, ev.Timestamp, ev.Epoch})
	}
	if newEpoch {
		s.Epochs = append(s.Epochs, epochJSON{ev.Epoch, ev.Seq, ev.Timestamp})
	}
	if ev.Timestamp.Before(s.MinTS) {
		s.MinTS = ev.Timestamp
	}
	if ev.Timestamp.After(s.MaxTS) {
		s.MaxTS = ev.Timestamp
	}
	s.Count++
	s.LastSeq, s.LastTS, s.LastEpoch = ev.Seq, ev.Timestamp, ev.Epoch
	s.Size = off + n
}

// encode returns the index file: the summary line, then the marks line.
func (x *indexer) encode() ([]byte, error) {
	b, err := json.Marshal(x.sum)
	if err != nil {
		return nil, err
	}
	b = append(b, '\n')
	rows := make([][4]int64, len(x.marks))
	for i, m := range x.marks {
		rows[i] = [4]int64{int64(m.Seq), m.Off, m.TS.UnixNano(), int64(m.Epoch)}
	}
	mb, err := json.Marshal(rows)
	if err != nil {
		return nil, err
	}
	return append(append(b, mb...), '\n'), nil
}

var errBadIndex = errors.New("bad segment index")

// readSummary reads only the first line of an index file.
func readSummary(path string) (summary, error) {
	f, err := os.Open(path)
	if err != nil {
		return summary{}, err
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(f, 4096).ReadSlice('\n')
	if err != nil {
		return summary{}, fmt.Errorf("%s: %w", path, errBadIndex)
	}
	var s summary
	if err := json.Unmarshal(line, &s); err != nil || s.Count == 0 || s.LastSeq < s.FirstSeq {
		return summary{}, fmt.Errorf("%s: %w", path, errBadIndex)
	}
	return s, nil
}

// readMarks reads the seek marks of a sealed segment.
func readMarks(path string) ([]mark, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	i := strings.IndexByte(string(data), '\n')
	if i < 0 {
		return nil, fmt.Errorf("%s: %w", path, errBadIndex)
	}
	var rows [][4]int64
	if err := json.Unmarshal(data[i+1:], &rows); err != nil {
		return nil, fmt.Errorf("%s: %w", path, errBadIndex)
	}
	marks := make([]mark, len(rows))
	for k, r := range rows {
		marks[k] = mark{uint64(r[0]), r[1], time.Unix(0, r[2]).UTC(), uint32(r[3])}
	}
	return marks, nil
}

// segFiles lists the segments of dir by first seq: which have a log, which
// an index.
type segFiles struct {
	bases []uint64 // sorted, with a log file
	idx   map[uint64]bool
	size  map[uint64]int64
}

func listSegments(dir string) (segFiles, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return segFiles{}, err
	}
	sf := segFiles{idx: map[uint64]bool{}, size: map[uint64]int64{}}
	logs := map[uint64]bool{}
	for _, e := range entries {
		base, ext, ok := parseSegName(e.Name())
		switch {
		case !ok:
		case ext == segIdx:
			sf.idx[base] = true
		default:
			logs[base] = true
			sf.bases = append(sf.bases, base)
			if fi, err := e.Info(); err == nil {
				sf.size[base] = fi.Size()
			}
		}
	}
	sort.Slice(sf.bases, func(a, b int) bool { return sf.bases[a] < sf.bases[b] })
	for base := range sf.idx {
		if !logs[base] {
			sf.idx[base] = false // an orphan index: its log was removed by retention
		}
	}
	return sf, nil
}
