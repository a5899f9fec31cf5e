package runtime

import (
	"errors"
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

// loadProcess rebuilds one process. A dir without process.json or exit FIFO
// is a start the daemon never got to the shim: not a process (nil, nil).
func loadProcess(c *Container, dir, id string) (*Process, error) {
	var rec processRecord
	if err := readJSON(filepath.Join(dir, processFile), &rec); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	exitFD, err := unix.Open(filepath.Join(dir, exitFifo), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: filepath.Join(dir, exitFifo), Err: err}
	}
	p := &Process{c: c, id: id, rec: rec, exitFD: exitFD, controlFD: -1, shimPidfd: -1}
	if err := p.attach(dir); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// attach reads the pid files and decides alive or dead, the exit FIFO being
// open already.
func (p *Process) attach(dir string) error {
	ids, err := readProcessIDs(dir)
	if err != nil {
		return err
	}
	p.pid, p.startTime, p.shimPid, p.shimStart = ids.pid, ids.startTime, ids.shimPid, ids.shimStart
	if exists(filepath.Join(dir, exitStatusFile)) || !sameProcess(p.shimPid, p.shimStart) {
		p.stopped = true
		closeFD(&p.exitFD) // a dead shim will never hang it up
		return nil
	}
	fd, err := unix.Open(filepath.Join(dir, controlFifo), unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: filepath.Join(dir, controlFifo), Err: err}
	}
	p.controlFD = fd
	return nil
}
