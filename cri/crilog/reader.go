package crilog

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"
)

// Record is one parsed line of a CRI log.
type Record struct {
	Time    time.Time
	Stream  string // Stdout or Stderr
	Partial bool   // tag P: the line goes on in the stream's next record
	Content []byte // without the record's newline
}

// ErrFormat is the class of every parse error: match it with errors.Is.
var ErrFormat = errors.New("crilog: bad record")

// ParseRecord parses one record, given without its final newline, with
// kubelet's rules: an RFC 3339 timestamp, a known stream, a tag whose first
// ':'-separated element is P or F, then the content (possibly empty).
func ParseRecord(line []byte) (Record, error) {
	var r Record
	ts, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return r, fmt.Errorf("%w: no space after the timestamp: %q", ErrFormat, clip(line))
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return r, fmt.Errorf("%w: timestamp %q: %v", ErrFormat, ts, err)
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return r, fmt.Errorf("%w: no space after the stream: %q", ErrFormat, clip(line))
	}
	switch string(stream) {
	case Stdout, Stderr:
	default:
		return r, fmt.Errorf("%w: stream %q is neither stdout nor stderr", ErrFormat, stream)
	}
	tag, content, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return r, fmt.Errorf("%w: no space after the tag: %q", ErrFormat, clip(line))
	}
	first, _, _ := bytes.Cut(tag, []byte{':'})
	switch string(first) {
	case TagPartial:
		r.Partial = true
	case TagFull:
	default:
		return r, fmt.Errorf("%w: tag %q is neither P nor F", ErrFormat, tag)
	}
	r.Time, r.Stream, r.Content = t, string(stream), content
	return r, nil
}

func clip(b []byte) []byte {
	if len(b) > 80 {
		return b[:80]
	}
	return b
}

// Reader reads the records of a CRI log.
type Reader struct {
	br   *bufio.Reader
	line int
}

// NewReader reads records from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 64*1024)}
}

// Next returns the next record, io.EOF at a clean end, or an error naming
// the line: a bad record, or a last line without its newline (a torn
// write, io.ErrUnexpectedEOF). The record's Content is its own copy.
func (r *Reader) Next() (Record, error) {
	line, err := r.br.ReadBytes('\n')
	if len(line) == 0 && errors.Is(err, io.EOF) {
		return Record{}, io.EOF
	}
	r.line++
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return Record{}, fmt.Errorf("crilog: line %d: %w", r.line, err)
	}
	rec, err := ParseRecord(line[:len(line)-1])
	if err != nil {
		return Record{}, fmt.Errorf("crilog: line %d: %w", r.line, err)
	}
	return rec, nil
}

// ReadAll reads every record of r, stopping at the first error.
func ReadAll(r io.Reader) ([]Record, error) {
	rd := NewReader(r)
	var recs []Record
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return recs, nil
		}
		if err != nil {
			return recs, err
		}
		recs = append(recs, rec)
	}
}

// Join gives back the bytes a stream carried, as kubelet shows them: the
// contents of its records in order, with a newline after each F record.
func Join(recs []Record, stream string) []byte {
	var b []byte
	for _, r := range recs {
		if r.Stream != stream {
			continue
		}
		b = append(b, r.Content...)
		if !r.Partial {
			b = append(b, '\n')
		}
	}
	return b
}
