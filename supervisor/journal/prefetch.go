package journal

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
)

// A replay that has several sealed segments ahead of it decodes them on
// other goroutines, two at a time, a segment or two ahead of the reader: a
// full replay of a large journal then uses more than one core. Memory stays
// bounded: at most prefetchAhead+1 decoded segments per replay, and at most
// prefetchSlots replays prefetch at once (the others decode in line).
const (
	prefetchAhead = 2
	prefetchSlots = 2
)

var prefetchSem = make(chan struct{}, prefetchSlots)

// Decoding a segment needs its bytes and a slice of its events, a few MiB
// each: recycled, so that a long replay does not keep the GC busy.
var (
	byteBufs  sync.Pool // *[]byte
	eventBufs sync.Pool // *[]Event
)

// Decoders are recycled too, for their string tables: a segment then
// starts with the strings of the one decoded before instead of making its
// ids again, and a short replay does not allocate a table of its own.
var decoders sync.Pool // *decoder

func getDecoder() *decoder {
	if d, ok := decoders.Get().(*decoder); ok {
		return d
	}
	return new(decoder)
}

func getBytes(n int) []byte {
	if p, ok := byteBufs.Get().(*[]byte); ok && cap(*p) >= n {
		return (*p)[:n]
	}
	return make([]byte, n)
}

func getEvents(n int) []Event {
	if p, ok := eventBufs.Get().(*[]Event); ok && cap(*p) >= n {
		return (*p)[:0]
	}
	return make([]Event, 0, n)
}

// batch is one decoded segment.
type batch struct {
	evs []Event
	err error
}

type prefetcher struct {
	futures chan chan batch // in segment order
	stop    chan struct{}
	cur     []Event
	i       int
}

// startPrefetch starts decoding segs (the first from offset off), or
// returns nil when every prefetch slot is taken.
func startPrefetch(segs []sealed, off int64) *prefetcher {
	select {
	case prefetchSem <- struct{}{}:
	default:
		return nil
	}
	p := &prefetcher{futures: make(chan chan batch, prefetchAhead-1), stop: make(chan struct{})}
	go p.feed(segs, off)
	return p
}

func (p *prefetcher) feed(segs []sealed, off int64) {
	defer close(p.futures)
	for _, s := range segs {
		f := make(chan batch, 1)
		select {
		case p.futures <- f:
		case <-p.stop:
			return
		}
		go func(s sealed, off int64) { f <- decodeSegment(s, off) }(s, off)
		off = 0
	}
}

// next returns the next decoded event, io.EOF after the last segment.
func (p *prefetcher) next() (Event, error) {
	for p.i == len(p.cur) {
		f, ok := <-p.futures
		if !ok {
			return Event{}, io.EOF
		}
		b := <-f
		if b.err != nil {
			return Event{}, b.err
		}
		if done := p.cur; done != nil {
			eventBufs.Put(&done) // every event was returned by value
		}
		p.cur, p.i = b.evs, 0
	}
	p.i++
	return p.cur[p.i-1], nil
}

// close stops the feeding; decodes under way finish into buffered
// channels nobody reads and are collected.
func (p *prefetcher) close() {
	close(p.stop)
	p.cur = nil
	<-prefetchSem
}

// decodeSegment reads a sealed segment from off to its indexed size in one
// read and decodes every valid record.
func decodeSegment(s sealed, off int64) batch {
	f, err := os.Open(s.logPath())
	if os.IsNotExist(err) {
		return batch{err: fmt.Errorf("segment %s: %w", s.logPath(), ErrNotRetained)}
	}
	if err != nil {
		return batch{err: fmt.Errorf("read journal segment: %w", err)}
	}
	defer f.Close()
	buf := getBytes(int(max(0, s.sum.Size-off)))
	defer byteBufs.Put(&buf) // the decoded strings are copies
	data := buf
	n, err := f.ReadAt(data, off)
	if err != nil && err != io.EOF {
		return batch{err: fmt.Errorf("read journal segment: %w", err)}
	}
	data = data[:n] // shorter than indexed: what is there is read
	evs := getEvents(s.sum.Count)
	dec := getDecoder()
	defer decoders.Put(dec)
	for len(data) > 0 {
		end := bytes.IndexByte(data, '\n')
		if end < 0 {
			break
		}
		evs = append(evs, Event{})
		if err := dec.decodeTo(trimNULs(data[:end]), &evs[len(evs)-1]); err != nil {
			evs = evs[:len(evs)-1]
		}
		data = data[end+1:]
	}
	return batch{evs: evs}
}
