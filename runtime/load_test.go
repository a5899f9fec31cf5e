package runtime

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/evjournal/containerd/api/errdefs"
	"golang.org/x/sys/unix"
)

// fakeState builds Root/id as a daemon would have left it, without runc.
type fakeState struct {
	t    *testing.T
	root string
}

func (f fakeState) container(id string) string {
	dir := filepath.Join(f.root, id)
	must(f.t, os.Mkdir(dir, 0o700))
	must(f.t, writeJSON(filepath.Join(dir, stateFile), &containerRecord{ID: id, Bundle: "/nonexistent", Incarnation: "inc" + id}))
	return dir
}

// process writes a process dir; files maps extra file names to contents.
func (f fakeState) process(cdir, id string, files map[string]string) {
	dir := filepath.Join(cdir, id)
	must(f.t, os.Mkdir(dir, 0o700))
	must(f.t, writeJSON(filepath.Join(dir, processFile), &processRecord{Exec: id != initID}))
	must(f.t, unix.Mkfifo(filepath.Join(dir, exitFifo), 0o600))
	must(f.t, unix.Mkfifo(filepath.Join(dir, controlFifo), 0o600))
	for name, data := range files {
		must(f.t, os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// self is a "shim" that is alive: this test process.
func self(t *testing.T) map[string]string {
	start, err := processStartTime(os.Getpid())
	must(t, err)
	return map[string]string{shimPidFile: strconv.Itoa(os.Getpid()), shimStartTimeFile: strconv.FormatUint(start, 10),
		pidFile: strconv.Itoa(os.Getpid()), startTimeFile: strconv.FormatUint(start, 10)}
}

func TestLoadDecidesAliveOrDead(t *testing.T) {
	f := fakeState{t, t.TempDir()}
	cdir := f.container("c")
	f.process(cdir, initID, self(t))
	exited := self(t)
	exited[exitStatusFile] = "3"
	f.process(cdir, "exited", exited)
	gone := self(t)
	gone[shimStartTimeFile] = "1" // the shim's pid now names another process
	f.process(cdir, "gone", gone)
	must(t, os.Mkdir(filepath.Join(cdir, "half-made"), 0o700)) // no process.json: not a process

	c, err := Load(f.root, "c")
	must(t, err)
	defer c.closeProcesses()
	want := map[string]ProcessState{initID: Running, "exited": Stopped, "gone": Stopped}
	if got := c.Processes(); len(got) != len(want) {
		t.Fatalf("processes %d, want %d", len(got), len(want))
	}
	for id, st := range want {
		p, _ := c.Process(id)
		if p.State() != st || (st == Running) != (p.ExitFD() >= 0) {
			t.Errorf("%s: state %v, exit fd %d; want %v", id, p.State(), p.ExitFD(), st)
		}
	}
	p, _ := c.Process("exited")
	if s, r := p.ExitStatus(); s != 3 || r != "" {
		t.Errorf("exited: %d %q", s, r)
	}
}

func TestLoadGoneShimDecides255(t *testing.T) {
	f := fakeState{t, t.TempDir()}
	cdir := f.container("c")
	files := self(t)
	files[shimStartTimeFile] = "1"
	files[startTimeFile] = "1" // and the container pid was reused too
	f.process(cdir, initID, files)
	c, err := Load(f.root, "c")
	must(t, err)
	p, _ := c.Process(initID)
	s, reason := p.ExitStatus()
	if s != StatusUnknown || !strings.Contains(reason, "another process") {
		t.Fatalf("ExitStatus = %d %q, want 255 for a reused pid", s, reason)
	}
	c.closeProcesses()
	c2, err := Load(f.root, "c")
	must(t, err)
	p2, _ := c2.Process(initID)
	if s2, r2 := p2.ExitStatus(); s2 != s || r2 != reason {
		t.Fatalf("after reload: %d %q, want the saved %d %q", s2, r2, s, reason)
	}
}

func TestLoadRejectsGarbage(t *testing.T) {
	f := fakeState{t, t.TempDir()}
	cdir := f.container("c")
	f.process(cdir, initID, map[string]string{pidFile: "not-a-pid"})
	if _, err := Load(f.root, "c"); err == nil {
		t.Fatal("Load accepted a garbage pid file")
	}
	if _, err := os.Stat(filepath.Join(cdir, initID, pidFile)); err != nil {
		t.Fatalf("Load deleted something: %v", err)
	}
	must(t, os.WriteFile(filepath.Join(cdir, stateFile), []byte("{"), 0o600))
	if _, err := Load(f.root, "c"); err == nil {
		t.Fatal("Load accepted a torn state.json")
	}
	if _, err := Load(f.root, "../c"); !errdefs.IsInvalidArgument(err) {
		t.Fatalf("Load(../c): %v", err)
	}
}

func TestListIDsAndSetAside(t *testing.T) {
	f := fakeState{t, t.TempDir()}
	f.container("b")
	f.container("a")
	must(t, os.WriteFile(filepath.Join(f.root, "events.log"), nil, 0o600))
	must(t, os.MkdirAll(filepath.Join(f.root, ".retired", "x.1"), 0o700))
	ids, err := ListIDs(f.root)
	must(t, err)
	if strings.Join(ids, ",") != "a,b" {
		t.Fatalf("ListIDs = %v", ids)
	}
	must(t, SetAside(f.root, "a", "cannot load: test"))
	if ids, _ := ListIDs(f.root); strings.Join(ids, ",") != "b" {
		t.Fatalf("ListIDs after SetAside = %v", ids)
	}
	aside, _ := os.ReadDir(filepath.Join(f.root, ".aside"))
	if len(aside) != 1 || !strings.HasPrefix(aside[0].Name(), "a.") {
		t.Fatalf(".aside = %v", aside)
	}
	reason, _ := os.ReadFile(filepath.Join(f.root, ".aside", aside[0].Name(), "reason.txt"))
	if !strings.Contains(string(reason), "cannot load: test") || !exists(filepath.Join(f.root, ".aside", aside[0].Name(), stateFile)) {
		t.Fatalf("set-aside dir lost data or reason: %q", reason)
	}
	if err := SetAside(f.root, "nope", "x"); !errdefs.IsNotFound(err) {
		t.Fatalf("SetAside of a missing id: %v", err)
	}
}

func TestRetiredContainers(t *testing.T) {
	f := fakeState{t, t.TempDir()}
	must(t, os.MkdirAll(retiredDir(f.root), 0o700))
	good := fakeState{t, retiredDir(f.root)}
	dir := good.container("g")
	must(t, os.Rename(dir, filepath.Join(retiredDir(f.root), retiredName("g", "incg"))))
	good.process(filepath.Join(retiredDir(f.root), retiredName("g", "incg")), initID, map[string]string{exitStatusFile: "0"})
	bad := filepath.Join(retiredDir(f.root), "b.inc")
	must(t, os.Mkdir(bad, 0o700))
	must(t, os.WriteFile(filepath.Join(bad, stateFile), []byte("torn"), 0o600))

	cs, err := RetiredContainers(f.root)
	must(t, err)
	if len(cs) != 1 || cs[0].ID() != "g" || !strings.HasSuffix(cs[0].Dir(), "/.retired/g.incg") {
		t.Fatalf("RetiredContainers = %v", cs)
	}
	p, ok := cs[0].Process(initID)
	if !ok || p.State() != Stopped {
		t.Fatal("retired init not loaded as stopped")
	}
	if aside, _ := os.ReadDir(asideDir(f.root)); len(aside) != 1 {
		t.Fatalf("the unloadable retired dir was not set aside: %v", aside)
	}
}
