// Package memtrim releases the page-table mappings of a program's own
// read-only file pages (its text and read-only data) that only its start-up
// or a burst of work ran.
//
// A Go program touches most of its binary while it starts (package init
// functions, type and descriptor registration, the pclntab for stack
// growth), and the kernel maps file pages 64 KiB around each fault
// (fault-around). An idle daemon or shim so keeps nearly its whole binary
// resident, although it then runs a few functions in a loop.
// madvise(MADV_DONTNEED) on those mappings drops the program's mappings of
// the pages, not the pages: they stay in the page cache, shared and
// reclaimable, and whatever the program runs afterwards faults its pages
// back in (a minor fault per 64 KiB). So what stays resident is the
// working set.
//
// Only private, non-writable mappings of the executable that hold no
// anonymous (copy-on-write) pages are released: for those, dropping the
// mapping cannot change what a later read sees. A mapping that was written
// (a RELRO segment after the dynamic loader's relocations) holds anonymous
// pages and is left alone.
//
// ReleaseText reads /proc/self/smaps into a buffer mapped for the call and
// unmapped after it, so it leaves no garbage on the heap (the shim runs
// with its GC off).
package memtrim

import (
	"bytes"
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// bufSize bounds the smaps read; a program with more mappings than fit
// (a daemon has some 60 here, about 25 KiB of smaps) is left as it is.
const bufSize = 256 << 10

// ReleaseText releases the executable's read-only file mappings (see the
// package doc) and returns how many bytes of mappings it released. On an
// error nothing, or only part, is released: never harmful.
func ReleaseText() (int, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	buf, err := unix.Mmap(-1, 0, bufSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return 0, err
	}
	defer unix.Munmap(buf)
	n, err := readAll("/proc/self/smaps", buf)
	if err != nil {
		return 0, err
	}
	var ranges [16]mapping
	released := 0
	for _, m := range readOnlyMappings(buf[:n], []byte(exe), ranges[:0]) {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, unix.MADV_DONTNEED); errno != 0 {
			return released, errno
		}
		released += int(m.end - m.start)
	}
	return released, nil
}

// readAll reads path into buf; a file that does not fit is an error.
func readAll(path string, buf []byte) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if m == 0 {
			return n, nil
		}
		n += m
	}
	return 0, errors.New("memtrim: " + path + " larger than " + strconv.Itoa(bufSize) + " bytes")
}

type mapping struct{ start, end uintptr }

// readOnlyMappings appends to out the mappings of path in smaps that are
// private, not writable, and hold no anonymous pages.
func readOnlyMappings(smaps, path []byte, out []mapping) []mapping {
	var cur mapping
	candidate := false
	for len(smaps) > 0 {
		line := smaps
		if i := bytes.IndexByte(smaps, '\n'); i >= 0 {
			line, smaps = smaps[:i], smaps[i+1:]
		} else {
			smaps = nil
		}
		if len(line) == 0 || !isHex(line[0]) { // an attribute line: "Rss:   4 kB"
			if candidate {
				if rest, ok := bytes.CutPrefix(line, []byte("Anonymous:")); ok {
					if f := bytes.Fields(rest); len(f) > 0 && string(f[0]) == "0" && len(out) < cap(out) {
						out = append(out, cur)
					}
					candidate = false
				}
			}
			continue
		}
		if m, perms, name, ok := header(line); ok {
			candidate = false
			if bytes.Equal(name, path) && perms[1] == '-' && perms[3] == 'p' {
				cur, candidate = m, true
			}
		}
	}
	return out
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }

// header parses a mapping's first line: "start-end perms offset dev inode [path]".
func header(line []byte) (m mapping, perms, name []byte, ok bool) {
	f := bytes.Fields(line)
	if len(f) < 5 || len(f[1]) != 4 {
		return m, nil, nil, false
	}
	lo, hi, found := bytes.Cut(f[0], []byte("-"))
	if !found {
		return m, nil, nil, false
	}
	a, err1 := strconv.ParseUint(string(lo), 16, 64)
	b, err2 := strconv.ParseUint(string(hi), 16, 64)
	if err1 != nil || err2 != nil || b <= a {
		return m, nil, nil, false
	}
	if len(f) >= 6 {
		name = f[5]
	}
	return mapping{uintptr(a), uintptr(b)}, f[1], name, true
}
