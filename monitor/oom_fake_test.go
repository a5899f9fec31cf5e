package monitor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeCgroup is a cgroup dir in a temp dir. A v2 counter file is rewritten
// in place (same inode, as the kernel's file), which inotify sees as
// IN_MODIFY. A v1 memory.oom_control is replaced atomically (temp file, then
// rename), so a read sees the old or the new text, never a half-written or
// empty file, as with the kernel's file (v1 watches read it by path).
type fakeCgroup struct {
	dir  string
	file string // memory.events (v2) or memory.oom_control (v1)
	v1   bool
	efd  int // v1: the monitor's eventfd, once read from cgroup.event_control
}

func newFakeV2(t *testing.T, parent, name string) *fakeCgroup {
	c := &fakeCgroup{dir: filepath.Join(parent, name)}
	c.file = filepath.Join(c.dir, "memory.events")
	c.mkdir(t)
	c.set(t, 0)
	return c
}

func newFakeV1(t *testing.T, parent, name string) *fakeCgroup {
	c := &fakeCgroup{dir: filepath.Join(parent, name), v1: true}
	c.file = filepath.Join(c.dir, "memory.oom_control")
	c.mkdir(t)
	c.set(t, 0)
	if err := os.WriteFile(filepath.Join(c.dir, "cgroup.event_control"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *fakeCgroup) mkdir(t *testing.T) {
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// set rewrites the counter file with oom_kill = n.
func (c *fakeCgroup) set(t *testing.T, n int) {
	t.Helper()
	text := fmt.Sprintf("low 0\nhigh 0\nmax 9\noom %d\noom_kill %d\noom_group_kill 0\n", n, n)
	if c.v1 {
		text = fmt.Sprintf("oom_kill_disable 0\nunder_oom 0\noom_kill %d\n", n)
	}
	c.write(t, text)
}

// write gives the counter file the content text: v1 atomically, v2 in place.
func (c *fakeCgroup) write(t *testing.T, text string) {
	t.Helper()
	if !c.v1 {
		if err := os.WriteFile(c.file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	tmp := c.file + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, c.file); err != nil {
		t.Fatal(err)
	}
}

func (c *fakeCgroup) source(id string) OOMSource {
	if c.v1 {
		return OOMSource{ID: id, V1Dir: c.dir}
	}
	return OOMSource{ID: id, V2Dir: c.dir}
}

// notify does what the kernel would: signal the eventfd the monitor wrote to
// cgroup.event_control (it is our own process's fd).
func (c *fakeCgroup) notify(t *testing.T) {
	t.Helper()
	if c.efd == 0 {
		c.efd = c.registeredEventfd(t)
	}
	if err := signalEventfd(c.efd); err != nil {
		t.Fatalf("signal eventfd %d: %v", c.efd, err)
	}
}

func (c *fakeCgroup) registeredEventfd(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(c.dir, "cgroup.event_control"))
	if err != nil {
		t.Fatal(err)
	}
	efd, _, _ := strings.Cut(string(data), " ")
	fd, err := strconv.Atoi(efd)
	if err != nil {
		t.Fatalf("cgroup.event_control holds %q, want \"<eventfd> <fd>\"", data)
	}
	return fd
}

// barrier makes watch b report and expects that report next: every event
// queued before it has been handled by then, so a stray report of another
// watch would have come first. This proves "no report" without sleeping.
type barrier struct {
	c  *fakeCgroup
	id string
	n  int
}

func (b *barrier) pass(t *testing.T, m *Monitor) {
	t.Helper()
	b.n++
	b.c.set(t, b.n)
	if b.c.v1 {
		b.c.notify(t)
	}
	expect(t, m, "oom:"+b.id)
}

func TestV2FakeCgroup(t *testing.T) {
	parent := t.TempDir()
	a := newFakeV2(t, parent, "a")
	bar := &barrier{c: newFakeV2(t, parent, "b"), id: "b"}
	m := newMonitor(t)
	for id, c := range map[string]*fakeCgroup{"a": a, "b": bar.c} {
		if err := m.MonitorOOM(c.source(id)); err != nil {
			t.Fatalf("MonitorOOM(%s): %v", id, err)
		}
	}
	a.set(t, 0) // a change of memory.events without a kill
	bar.pass(t, m)
	a.set(t, 1)
	expect(t, m, "oom:a")
	bar.pass(t, m) // nothing more from a
	a.set(t, 1)    // rewritten, same count
	bar.pass(t, m)
	a.set(t, 3) // two kills between reads
	expect(t, m, "oom:a")
	bar.pass(t, m)

	if err := os.RemoveAll(a.dir); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the removed cgroup's watch to be dropped", func() bool { return m.Count() == 1 })
	bar.pass(t, m) // the shared parent watch still serves b
	if err := os.RemoveAll(bar.c.dir); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every watch to be dropped", func() bool { return m.Count() == 0 })
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.files) != 0 || len(m.dirs) != 0 {
		t.Errorf("inotify watches left: %d files, %d dirs", len(m.files), len(m.dirs))
	}
}

// v1 without root: the eventfd is signalled by the test, as runc's tests do.
func TestV1FakeCgroup(t *testing.T) {
	parent := t.TempDir()
	a := newFakeV1(t, parent, "a")
	bar := &barrier{c: newFakeV1(t, parent, "b"), id: "b"}
	m := newMonitor(t)
	for id, c := range map[string]*fakeCgroup{"a": a, "b": bar.c} {
		if err := m.MonitorOOM(c.source(id)); err != nil {
			t.Fatalf("MonitorOOM(%s): %v", id, err)
		}
	}
	a.notify(t) // under OOM, no kill (yet)
	bar.pass(t, m)
	a.set(t, 1)
	a.notify(t)
	expect(t, m, "oom:a")
	a.notify(t) // still under OOM: fires again, same count
	bar.pass(t, m)

	if err := os.RemoveAll(a.dir); err != nil {
		t.Fatal(err)
	}
	a.notify(t) // the kernel signals the eventfd when the cgroup goes away
	waitFor(t, "the removed cgroup's watch to be dropped", func() bool { return m.Count() == 1 })
	bar.pass(t, m)
}

// A kill counted after its notification (the kernel notifies before it
// kills) is still reported, by the re-check of pending v1 watches.
func TestV1KillCountedAfterNotification(t *testing.T) {
	a := newFakeV1(t, t.TempDir(), "a")
	m := newMonitor(t)
	if err := m.MonitorOOM(a.source("a")); err != nil {
		t.Fatal(err)
	}
	a.notify(t)
	a.set(t, 1) // no second notification: only the re-check can see it
	expect(t, m, "oom:a")
}

// A read of the counter that fails or comes back empty while the cgroup is
// still there does not end the watch: the next kill is still reported. Only
// the cgroup's removal drops it.
func TestBadReadKeepsWatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		v1    bool
		spoil func(t *testing.T, c *fakeCgroup)
	}{
		{"v1 empty", true, func(t *testing.T, c *fakeCgroup) { c.write(t, "") }},
		{"v1 unreadable", true, func(t *testing.T, c *fakeCgroup) {
			// A directory in its place: the read fails with EISDIR.
			if err := os.Remove(c.file); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(c.file, 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{"v1 garbage", true, func(t *testing.T, c *fakeCgroup) { c.write(t, "oom_kill \x00\n") }},
		{"v2 empty", false, func(t *testing.T, c *fakeCgroup) { c.write(t, "") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			newFake := newFakeV2
			if tc.v1 {
				newFake = newFakeV1
			}
			a := newFake(t, parent, "a")
			bar := &barrier{c: newFake(t, parent, "b"), id: "b"}
			m := newMonitor(t)
			for id, c := range map[string]*fakeCgroup{"a": a, "b": bar.c} {
				if err := m.MonitorOOM(c.source(id)); err != nil {
					t.Fatalf("MonitorOOM(%s): %v", id, err)
				}
			}
			tc.spoil(t, a)
			if a.v1 {
				a.notify(t)
			}
			bar.pass(t, m) // a's bad read was handled before this report
			if got := m.Count(); got != 2 {
				t.Fatalf("after one bad read: %d watches, want 2 (the watch of a live cgroup was dropped)", got)
			}
			if tc.v1 {
				os.Remove(a.file) // the spoilt file or directory
			}
			a.set(t, 1)
			if a.v1 {
				a.notify(t)
			}
			expect(t, m, "oom:a")

			if err := os.RemoveAll(a.dir); err != nil {
				t.Fatal(err)
			}
			if a.v1 {
				a.notify(t)
			}
			waitFor(t, "the removed cgroup's watch to be dropped", func() bool { return m.Count() == 1 })
		})
	}
}

// OOM and exit ready in the same wakeup: the OOM is delivered first.
func TestOOMBeforeExitInOneWakeup(t *testing.T) {
	a := newFakeV1(t, t.TempDir(), "a")
	m := newMonitor(t)
	if err := m.MonitorOOM(a.source("a")); err != nil {
		t.Fatal(err)
	}
	blockR, blockW := pipe(t)
	initR, initW := pipe(t)
	defer closeFD(t, blockR)
	defer closeFD(t, initR)
	for _, fd := range []int{blockR, initR} {
		if err := m.Monitor(fdSource(fd)); err != nil {
			t.Fatal(err)
		}
	}
	// Hold the loop in a send nobody receives yet...
	closeFD(t, blockW)
	waitFor(t, "the loop to take the first exit", func() bool { return m.Count() == 2 })
	// ...so that the OOM and the init's exit are both ready at its next epoll_wait.
	a.set(t, 1)
	a.notify(t)
	closeFD(t, initW)
	expect(t, m, exitName(blockR), "oom:a", exitName(initR))
}

// An exit that names its cgroup (OOMScoped) re-reads the counter first, so
// the OOM is reported before the exit even if no notification arrived yet.
func TestOOMScopedExitRereadsCounter(t *testing.T) {
	a := newFakeV1(t, t.TempDir(), "a")
	m := newMonitor(t)
	if err := m.MonitorOOM(a.source("a")); err != nil {
		t.Fatal(err)
	}
	r, w := pipe(t)
	defer closeFD(t, r)
	if err := m.Monitor(scopedSource{fd: r, id: "a"}); err != nil {
		t.Fatal(err)
	}
	a.set(t, 1) // counted, never notified
	closeFD(t, w)
	expect(t, m, "oom:a", exitName(r))
}

func TestStopOOM(t *testing.T) {
	parent := t.TempDir()
	v1, v2 := newFakeV1(t, parent, "v1"), newFakeV2(t, parent, "v2")
	countFDs(t)
	m := newMonitor(t)
	fds := countFDs(t)
	for id, c := range map[string]*fakeCgroup{"v1": v1, "v2": v2} {
		if err := m.MonitorOOM(c.source(id)); err != nil {
			t.Fatalf("MonitorOOM(%s): %v", id, err)
		}
		if err := m.MonitorOOM(c.source(id)); !errors.Is(err, ErrExists) {
			t.Errorf("MonitorOOM(%s) twice: got %v, want ErrExists", id, err)
		}
	}
	if err := m.MonitorOOM(v2.source("other-id")); !errors.Is(err, ErrExists) {
		t.Errorf("a second id on the same v2 cgroup: got %v, want ErrExists", err)
	}
	if got := m.Count(); got != 2 {
		t.Fatalf("Count = %d, want 2", got)
	}
	m.StopOOM("v1")
	m.StopOOM("v2")
	m.StopOOM("never-watched")
	if got := m.Count(); got != 0 {
		t.Errorf("Count after StopOOM = %d, want 0", got)
	}
	if got := countFDs(t); got != fds {
		t.Errorf("open fds after StopOOM = %d, want %d: the watches' fds must be closed", got, fds)
	}
	if err := m.MonitorOOM(v2.source("v2")); err != nil {
		t.Errorf("watching again after StopOOM: %v", err)
	}
}

// MonitorOOM of a cgroup that is not there fails and leaves nothing behind.
func TestMonitorOOMMissingCgroup(t *testing.T) {
	m := newMonitor(t)
	missing := filepath.Join(t.TempDir(), "nope")
	for _, s := range []OOMSource{{ID: "a", V1Dir: missing}, {ID: "a", V2Dir: missing}} {
		if err := m.MonitorOOM(s); !errors.Is(err, unix.ENOENT) {
			t.Errorf("MonitorOOM(%+v): got %v, want ENOENT", s, err)
		}
	}
	if got := m.Count(); got != 0 {
		t.Errorf("Count = %d, want 0", got)
	}
}

// A watch given a baseline (read before the container started) reports a
// kill counted before it was armed, with no notification at all, once; a
// watch whose baseline equals the counter reports nothing. For both v1 and
// v2.
func TestBaselineGivenReportsEarlierKill(t *testing.T) {
	for _, v1 := range []bool{true, false} {
		t.Run(fmt.Sprintf("v1=%v", v1), func(t *testing.T) {
			parent := t.TempDir()
			mk := newFakeV2
			if v1 {
				mk = newFakeV1
			}
			early, quiet := mk(t, parent, "early"), mk(t, parent, "quiet")
			bar := &barrier{c: mk(t, parent, "bar"), id: "bar"}
			early.set(t, 3) // the kill happened between the baseline (2) and the watch
			quiet.set(t, 5)
			m := newMonitor(t)
			two, five := uint64(2), uint64(5)
			for id, src := range map[string]OOMSource{"bar": bar.c.source("bar"), "early": early.source("early"), "quiet": quiet.source("quiet")} {
				switch id {
				case "early":
					src.Baseline = &two
				case "quiet":
					src.Baseline = &five
				}
				if err := m.MonitorOOM(src); err != nil {
					t.Fatalf("MonitorOOM(%s): %v", id, err)
				}
			}
			expect(t, m, "oom:early")
			bar.pass(t, m) // nothing from quiet, nothing more from early
			early.set(t, 4)
			if v1 {
				early.notify(t)
			}
			expect(t, m, "oom:early") // later kills count from the given baseline on
			bar.pass(t, m)
		})
	}
}
