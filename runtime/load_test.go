package runtime

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
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
	c, err := Load(f.root, "c")
	must(t, err)
	if p, ok := c.Process(initID); !ok || p.State() != Stopped {
		t.Fatal("a process with a garbage pid file and no shim: not loaded as a dead process")
	}
	c.closeProcesses()
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

// TestLoadSalvagesDamagedFiles: a live process whose shim.pid is garbage is
// found through its parent; one whose process.json is garbage and whose
// exit FIFO is a regular file is still loaded alive, and seen stopped as
// soon as its "shim" is gone (what reconcile relies on).
func TestLoadSalvagesDamagedFiles(t *testing.T) {
	f := fakeState{t, t.TempDir()}
	cdir := f.container("c")
	child := exec.Command("sleep", "60")
	must(t, child.Start())
	defer child.Process.Kill()
	start, err := processStartTime(child.Process.Pid)
	must(t, err)
	f.process(cdir, initID, map[string]string{pidFile: strconv.Itoa(child.Process.Pid),
		startTimeFile: strconv.FormatUint(start, 10), shimPidFile: "garbage"})
	// "shim" of the exec: the sleep child, so it can be made to die.
	f.process(cdir, "ex", map[string]string{shimPidFile: strconv.Itoa(child.Process.Pid), shimStartTimeFile: strconv.FormatUint(start, 10)})
	ex := filepath.Join(cdir, "ex")
	must(t, os.WriteFile(filepath.Join(ex, processFile), []byte("{torn"), 0o600))
	must(t, os.Remove(filepath.Join(ex, exitFifo)))
	must(t, os.WriteFile(filepath.Join(ex, exitFifo), nil, 0o600))

	c, err := Load(f.root, "c")
	must(t, err)
	defer c.closeProcesses()
	p, _ := c.Process(initID)
	if p.State() != Running || p.shimPid != os.Getpid() {
		t.Fatalf("init: state %v, shim %d; want running with this test as its shim (the parent)", p.State(), p.shimPid)
	}
	e, ok := c.Process("ex")
	if !ok || e.State() != Running || e.ExitFD() != -1 {
		t.Fatalf("exec with damaged files: loaded %v, exit fd %d", ok, e.ExitFD())
	}
	child.Process.Kill()
	child.Wait()
	if e.State() != Stopped {
		t.Fatal("the exec's shim is gone, but State still says running")
	}
}
