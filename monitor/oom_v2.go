package monitor

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// dirWatch is an inotify watch on a directory holding watched v2 cgroups. The
// kernel reports a cgroup's rmdir only there (kernfs sends no IN_DELETE_SELF
// for the files of a removed cgroup), so one watch per parent serves all its
// children. Guarded by m.mu.
type dirWatch struct {
	children map[string]*oomWatch // by base name
}

const (
	fileMask = unix.IN_MODIFY | unix.IN_DELETE_SELF | unix.IN_UNMOUNT
	dirMask  = unix.IN_DELETE | unix.IN_ONLYDIR
	goneMask = unix.IN_DELETE_SELF | unix.IN_IGNORED | unix.IN_UNMOUNT
)

// watchV2 watches the cgroup's memory.events for IN_MODIFY (the kernel
// notifies every change of it) and its parent directory for the cgroup's
// removal.
func (m *Monitor) watchV2(s OOMSource) error {
	w := newWatch(m, s)
	w.events = filepath.Join(w.dir, m.v2File)
	w.name = filepath.Base(w.dir)
	if err := w.baseline(s.Baseline); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.admit(w.id); err != nil {
		return err
	}
	wd, err := unix.InotifyAddWatch(m.inofd, w.events, fileMask)
	if err != nil {
		return fmt.Errorf("monitor: OOM watch %q: inotify %s: %w", w.id, w.events, err)
	}
	if other := m.files[int32(wd)]; other != nil {
		// Same inode: the kernel handed back the other watch's wd.
		return fmt.Errorf("monitor: OOM watch %q: %s is watched for %q: %w", w.id, w.events, other.id, ErrExists)
	}
	w.fileWD = int32(wd)
	m.files[w.fileWD] = w
	m.byID[w.id] = w
	m.watchParent(w)
	m.readSoon(w, s)
	return nil
}

// watchParent arms (or shares) the watch on w's parent dir. Failing to arm it
// is a warning, not an error: OOMs are still reported, and the watch then
// ends only by StopOOM. Call with m.mu held.
func (m *Monitor) watchParent(w *oomWatch) {
	wd, err := unix.InotifyAddWatch(m.inofd, filepath.Dir(w.dir), dirMask)
	if err != nil {
		w.log.WithError(err).Warn("monitor: cannot watch the cgroup's parent; its removal will not be noticed")
		return
	}
	d := m.dirs[int32(wd)]
	if d == nil {
		d = &dirWatch{children: map[string]*oomWatch{}}
		m.dirs[int32(wd)] = d
	}
	w.dirWD = int32(wd)
	d.children[w.name] = w
}

// unwatchV2 removes w's inotify watches, and the parent's when w was its last
// child. Call with m.mu held.
func (m *Monitor) unwatchV2(w *oomWatch) {
	delete(m.files, w.fileWD)
	// EINVAL: the kernel already dropped the watch (IN_IGNORED).
	if _, err := unix.InotifyRmWatch(m.inofd, uint32(w.fileWD)); err != nil && !errors.Is(err, unix.EINVAL) {
		w.log.WithError(err).Warn("monitor: cannot remove the memory.events watch")
	}
	d := m.dirs[w.dirWD]
	if d == nil || d.children[w.name] != w {
		return
	}
	delete(d.children, w.name)
	if len(d.children) == 0 {
		delete(m.dirs, w.dirWD)
		unix.InotifyRmWatch(m.inofd, uint32(w.dirWD))
	}
}

// inotifyEvent is one decoded record of the inotify fd.
type inotifyEvent struct {
	wd   int32
	mask uint32
	name string
}

// readInotify drains the inotify fd and handles every event in it.
func (m *Monitor) readInotify(b *batch) {
	buf := m.inoBuf
	for {
		n, err := unix.Read(m.inofd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return // EAGAIN: drained
		}
		for _, ev := range decodeInotify(buf[:n]) {
			m.inotified(ev, b)
		}
	}
}

// decodeInotify splits a read of the inotify fd into events.
func decodeInotify(buf []byte) []inotifyEvent {
	var out []inotifyEvent
	for len(buf) >= unix.SizeofInotifyEvent {
		nameLen := int(binary.NativeEndian.Uint32(buf[12:16]))
		end := unix.SizeofInotifyEvent + nameLen
		if end > len(buf) {
			break
		}
		out = append(out, inotifyEvent{
			wd:   int32(binary.NativeEndian.Uint32(buf[0:4])),
			mask: binary.NativeEndian.Uint32(buf[4:8]),
			name: string(bytes.TrimRight(buf[unix.SizeofInotifyEvent:end], "\x00")),
		})
		buf = buf[end:]
	}
	return out
}

// inotified handles one inotify event: a change of a memory.events file, or
// the removal of the file or of a watched cgroup dir.
func (m *Monitor) inotified(ev inotifyEvent, b *batch) {
	if ev.mask&unix.IN_Q_OVERFLOW != 0 {
		m.recheckAllV2(b) // events were lost: any counter may have moved
		return
	}
	w, removed := m.v2Target(ev)
	switch {
	case w == nil:
	case removed:
		m.remove(w)
	default:
		m.checkInto(w, b)
	}
}

// v2Target resolves an event to its watch and says whether it tells of the
// watch's cgroup being removed.
func (m *Monitor) v2Target(ev inotifyEvent) (w *oomWatch, removed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if w := m.files[ev.wd]; w != nil {
		return w, ev.mask&goneMask != 0
	}
	d := m.dirs[ev.wd]
	if d == nil {
		return nil, false
	}
	if ev.mask&unix.IN_IGNORED != 0 {
		delete(m.dirs, ev.wd) // the parent itself went away
		return nil, false
	}
	w = d.children[ev.name]
	return w, w != nil && ev.mask&unix.IN_DELETE != 0
}

// checkInto re-reads w's counter and records what it found in b.
func (m *Monitor) checkInto(w *oomWatch, b *batch) outcome {
	o := w.check()
	switch o {
	case killed:
		b.ooms = append(b.ooms, w.id)
	case gone:
		m.remove(w)
	}
	return o
}

// recheckAllV2 re-reads every v2 counter after an inotify queue overflow.
func (m *Monitor) recheckAllV2(b *batch) {
	m.mu.Lock()
	all := make([]*oomWatch, 0, len(m.files))
	for _, w := range m.files {
		all = append(all, w)
	}
	m.mu.Unlock()
	m.log.Warn("monitor: inotify queue overflowed; re-reading every cgroup v2 counter")
	for _, w := range all {
		m.checkInto(w, b)
	}
}
