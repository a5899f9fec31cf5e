package runtime

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// Load rebuilds Root/ID after a daemon restart, without runc: state.json and
// every process dir. For each process it opens the exit FIFO first and only
// then decides: dead if exitStatus exists or its shim (shim.pid +
// shim.starttime) is gone, else live, keeping the fds for the monitor (a
// shim alive after the open will hang the FIFO up when it exits). A dir
// that cannot be loaded is an error; Load never deletes anything.
func Load(root, id string) (*Container, error) {
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	c, err := loadContainer(root, filepath.Join(root, id), false)
	if err != nil {
		return nil, fmt.Errorf("load container %q: %w", id, err)
	}
	if c.rec.ID != id {
		c.closeProcesses()
		return nil, fmt.Errorf("load container %q: %s names container %q", id, stateFile, c.rec.ID)
	}
	return c, nil
}

// loadContainer reads dir. A retired container is loaded leniently: a
// process dir that cannot be loaded is logged and skipped.
func loadContainer(root, dir string, retired bool) (*Container, error) {
	var rec containerRecord
	if err := readJSON(filepath.Join(dir, stateFile), &rec); err != nil {
		return nil, err
	}
	if rec.ID == "" || rec.Incarnation == "" {
		return nil, fmt.Errorf("%s: no id or incarnation", filepath.Join(dir, stateFile))
	}
	c := &Container{root: root, rec: rec, retired: retired, processes: map[string]*Process{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if err := c.loadEntry(dir, e, retired); err != nil {
			c.closeProcesses()
			return nil, err
		}
	}
	return c, nil
}

func (c *Container) loadEntry(dir string, e fs.DirEntry, lenient bool) error {
	if !e.IsDir() || ValidateID(e.Name()) != nil {
		return nil
	}
	p, err := loadProcess(c, filepath.Join(dir, e.Name()), e.Name())
	switch {
	case err != nil && lenient:
		logrus.WithFields(logrus.Fields{"container": c.rec.ID, "pid": e.Name()}).WithError(err).Warn("retired container: skipping unloadable process")
	case err != nil:
		return fmt.Errorf("process %q: %w", e.Name(), err)
	case p != nil:
		c.processes[p.id] = p
	}
	return nil
}

// loadProcess rebuilds one process from what survives of its dir (see
// salvage.go). A dir without process.json or exit FIFO and without any
// trace of a shim is a start the daemon never got to the shim: not a
// process (nil, nil).
func loadProcess(c *Container, dir, id string) (*Process, error) {
	log := logrus.WithFields(logrus.Fields{"container": c.rec.ID, "pid": id})
	rec, found, err := readProcessRecord(log, dir, id)
	if err != nil {
		return nil, err
	}
	shimTrace := exists(filepath.Join(dir, shimPidFile)) || exists(filepath.Join(dir, pidFile))
	if !shimTrace && (!found || !exists(filepath.Join(dir, exitFifo))) {
		return nil, nil
	}
	// The exit FIFO is opened before the shim's liveness is looked at: a
	// shim alive after the open will hang it up when it exits.
	p := &Process{c: c, id: id, rec: rec, exitFD: openExitFifo(log, dir), controlFD: -1, shimPidfd: -1}
	p.attach(log, dir, salvageIDs(log, dir))
	return p, nil
}

// attach takes the pid files and decides alive or dead, the exit FIFO being
// open already.
func (p *Process) attach(log *logrus.Entry, dir string, ids processIDs) {
	p.pid, p.startTime, p.shimPid, p.shimStart = ids.pid, ids.startTime, ids.shimPid, ids.shimStart
	if exists(filepath.Join(dir, exitStatusFile)) || !p.shimAlive() {
		p.stopped = true
		closeFD(&p.exitFD) // a dead shim will never hang it up
		return
	}
	fd, err := unix.Open(filepath.Join(dir, controlFifo), unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		log.WithError(err).Warn("control FIFO unusable: resize and close-stdin will fail for this process")
		return
	}
	p.controlFD = fd
}

// shimAlive reports whether the process's shim (by pid and start time)
// still runs; with the shim unknown, whether the container process does.
func (p *Process) shimAlive() bool {
	if p.shimPid > 0 {
		return sameProcess(p.shimPid, p.shimStart)
	}
	return sameProcess(p.pid, p.startTime)
}
