package main

import (
	"path/filepath"
	"time"
)

// runcGlobal is what goes before every runc subcommand: the binary, our log
// file in JSON (where runc's own error message is found) and the daemon's
// runtimeArgs.
type runcGlobal struct {
	runtime string
	log     string // <dir>/log.json
	args    []string
}

func (g runcGlobal) argv(sub []string) []string {
	argv := append([]string{g.runtime, "--log", g.log, "--log-format", "json"}, g.args...)
	return append(argv, sub...)
}

// createCmd is `runc create`: the init, created but not started (the daemon
// runs `runc start` once its monitors are armed).
type createCmd struct {
	id, bundle, pidFile, consoleSocket string
	noPivot                            bool
}

func (c createCmd) args() []string {
	a := []string{"create", "--bundle", c.bundle}
	if c.consoleSocket != "" {
		a = append(a, "--console-socket", c.consoleSocket)
	}
	if c.noPivot {
		a = append(a, "--no-pivot")
	}
	return append(a, "--pid-file", c.pidFile, c.id)
}

// execCmd is `runc exec -d`: an exec, running when runc returns.
type execCmd struct {
	id, processFile, pidFile, consoleSocket string
}

func (c execCmd) args() []string {
	a := []string{"exec", "-d", "--process", c.processFile}
	if c.consoleSocket != "" {
		a = append(a, "--console-socket", c.consoleSocket)
	}
	return append(a, "--pid-file", c.pidFile, c.id)
}

// restoreCmd is `runc restore -d`: the init restored from a checkpoint,
// running when runc returns.
type restoreCmd struct {
	id, bundle, pidFile, imagePath, workPath, consoleSocket string
	opts                                                    checkpointOpts
	noPivot                                                 bool
}

func (c restoreCmd) args() []string {
	a := []string{"restore", "-d", "--image-path", c.imagePath, "--work-path", c.workPath}
	for _, f := range []struct {
		on   bool
		flag string
	}{{c.opts.TCP, "--tcp-established"}, {c.opts.UnixSockets, "--ext-unix-sk"}, {c.opts.Shell, "--shell-job"}, {c.noPivot, "--no-pivot"}} {
		if f.on {
			a = append(a, f.flag)
		}
	}
	for _, ns := range c.opts.EmptyNS {
		a = append(a, "--empty-ns", ns)
	}
	if c.consoleSocket != "" {
		a = append(a, "--console-socket", c.consoleSocket)
	}
	return append(a, "--bundle", c.bundle, "--pid-file", c.pidFile, c.id)
}

// runcArgv is the full command line that starts the process described by
// cfg, from the state dir dir. consoleSocket is "" without a terminal.
func runcArgv(cfg *processConfig, a args, dir, consoleSocket string, now time.Time) []string {
	g := runcGlobal{runtime: cfg.Runtime, log: filepath.Join(dir, "log.json"), args: cfg.RuntimeArgs}
	pidFile := filepath.Join(dir, "pid")
	switch {
	case cfg.Exec:
		return g.argv(execCmd{id: a.id, processFile: filepath.Join(dir, runcProcessFile), pidFile: pidFile, consoleSocket: consoleSocket}.args())
	case cfg.Checkpoint != "":
		work := filepath.Join(cfg.Checkpoint, "criu.work", "restore-"+string(appendTime(nil, now)))
		return g.argv(restoreCmd{id: a.id, bundle: a.bundle, pidFile: pidFile, imagePath: cfg.Checkpoint, workPath: work, consoleSocket: consoleSocket, opts: cfg.CheckpointOpts, noPivot: cfg.NoPivotRoot}.args())
	default:
		return g.argv(createCmd{id: a.id, bundle: a.bundle, pidFile: pidFile, consoleSocket: consoleSocket, noPivot: cfg.NoPivotRoot}.args())
	}
}

// runcProcessFile holds the bare OCI process object of an exec, the file
// given to `runc exec --process` (process.json carries our extra keys).
const runcProcessFile = "runc-process.json"
