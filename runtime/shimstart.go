package runtime

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/containerd/errdefs"

	"github.com/evjournal/containerd/internal/crashpoint"
)

// runShim gives p a shim (an idle spare, or one started now: spares.go)
// and waits for its start report. On success
// p knows its pids and owns the shim's pidfd. The returned shimProc (also on
// error, when the shim was started) is what abortStart must kill.
func (p *Process) runShim(ctx context.Context) (*shimProc, error) {
	c := p.c
	sp, report, pool, err := assignShim(c.rec.Shim, shimArgs{ID: c.rec.ID, Bundle: c.runtimeBundle(), Runtime: c.rec.Runtime}, p.dir())
	if err != nil {
		return nil, err
	}
	defer pool.refill()                          // once the report is read: see refill
	crashpoint.At("loop-start:after-shim-spawn") // the shim runs runc on its own
	defer report.Close()
	rep, err := readStartReport(ctx, report, c.rec.StartTimeout)
	if err != nil {
		return sp, err
	}
	if rep.Error != "" {
		return sp, p.startFailure(rep)
	}
	if err := p.loadStarted(rep.Pid, sp.pid); err != nil {
		return sp, fmt.Errorf("container %q: process %q: shim broke its contract: %v: %w", c.rec.ID, p.id, err, errdefs.ErrInternal)
	}
	p.shimPidfd = sp.pidfd
	return sp, nil
}

// startFailure turns the shim's error report into the v0.2 error: runc's
// own message when runc failed (a runc of the 0.2 era logs no error entry:
// the shim says so in its report), else the shim's.
func (p *Process) startFailure(rep *startReport) error {
	if rep.Op == "start" {
		return fmt.Errorf("container %q: start: %w", p.c.rec.ID, &RuncError{Op: "start", Status: rep.Status, Output: rep.Output})
	}
	if rep.Runtime || runcLoggedError(filepath.Join(p.dir(), runcLogFile)) {
		return &OCIRuntimeError{Msg: rep.Error}
	}
	return &ShimError{Msg: rep.Error}
}

// runcLoggedError reports whether runc's JSON log holds an error entry.
func runcLoggedError(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		var entry struct{ Level string }
		if json.Unmarshal(sc.Bytes(), &entry) == nil && entry.Level == "error" {
			return true
		}
	}
	return false
}

// loadStarted reads the files the shim wrote before its success report and
// checks them against the report and the spawned pid.
func (p *Process) loadStarted(reported, shimPid int) error {
	ids, err := readProcessIDs(p.dir())
	switch {
	case err != nil:
		return err
	case reported <= 0:
		return fmt.Errorf("start report with neither a pid nor an error")
	case ids.pid != reported:
		return fmt.Errorf("reported pid %d, pid file holds %d", reported, ids.pid)
	case ids.startTime == 0:
		return fmt.Errorf("no %s written for pid %d", startTimeFile, reported)
	case ids.shimPid != shimPid:
		return fmt.Errorf("%s holds %d, the shim is %d", shimPidFile, ids.shimPid, shimPid)
	case ids.shimStart == 0:
		return fmt.Errorf("no %s written", shimStartTimeFile)
	}
	p.pid, p.startTime, p.shimPid, p.shimStart = ids.pid, ids.startTime, ids.shimPid, ids.shimStart
	return nil
}

// processIDs are the pid files of a process dir; 0 where a file is absent.
type processIDs struct {
	pid, shimPid         int
	startTime, shimStart uint64
}

func readProcessIDs(dir string) (processIDs, error) {
	var ids processIDs
	var err [4]error
	ids.pid, err[0] = readPid(filepath.Join(dir, pidFile))
	ids.startTime, err[1] = readOptionalUint(filepath.Join(dir, startTimeFile))
	ids.shimPid, err[2] = readPid(filepath.Join(dir, shimPidFile))
	ids.shimStart, err[3] = readOptionalUint(filepath.Join(dir, shimStartTimeFile))
	for _, e := range err {
		if e != nil {
			return ids, e
		}
	}
	return ids, nil
}
