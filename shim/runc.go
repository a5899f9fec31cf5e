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
	log     string // <dir>/log.json; "" for a runtime without --log-format
	args    []string
}

// globalArgs are the global args for cfg's runtime, run from state dir dir.
func globalArgs(cfg *processConfig, dir string) runcGlobal {
	g := runcGlobal{runtime: cfg.Runtime, args: cfg.RuntimeArgs}
	if cfg.Features.Log {
		g.log = filepath.Join(dir, "log.json")
	}
	return g
}

func (g runcGlobal) argv(sub []string) []string {
	argv := []string{g.runtime}
	if g.log != "" {
		argv = append(argv, "--log", g.log, "--log-format", "json")
	}
	return append(append(argv, g.args...), sub...)
}

// consoleArg gives runc the terminal: "--console-socket <socket>" (runc
// makes the pty and sends us the master) or, for a runc before 1.0.0-rc4,
// "--console <pty slave>" (we made the pty). Zero without a terminal.
type consoleArg struct {
	flag, path string
}

func (c consoleArg) args() []string {
	if c.path == "" {
		return nil
	}
	return []string{c.flag, c.path}
}

// createCmd is `runc create`: the init, created but not started (the daemon
// runs `runc start` once its monitors are armed).
type createCmd struct {
	id, bundle, pidFile string
	console             consoleArg
	noPivot             bool
}

func (c createCmd) args() []string {
	a := append([]string{"create", "--bundle", c.bundle}, c.console.args()...)
	if c.noPivot {
		a = append(a, "--no-pivot")
	}
	return append(a, "--pid-file", c.pidFile, c.id)
}

// execCmd is `runc exec -d`: an exec, running when runc returns.
type execCmd struct {
	id, processFile, pidFile string
	console                  consoleArg
}

func (c execCmd) args() []string {
	a := append([]string{"exec", "-d", "--process", c.processFile}, c.console.args()...)
	return append(a, "--pid-file", c.pidFile, c.id)
}

// restoreCmd is `runc restore -d`: the init restored from a checkpoint,
// running when runc returns.
type restoreCmd struct {
	id, bundle, pidFile, imagePath, workPath string
	console                                  consoleArg
	opts                                     checkpointOpts
	noPivot                                  bool
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
	a = append(a, c.console.args()...)
	return append(a, "--bundle", c.bundle, "--pid-file", c.pidFile, c.id)
}

// runcArgv is the full command line that starts the process described by
// cfg, from the state dir dir. console is zero without a terminal.
func runcArgv(cfg *processConfig, a args, dir string, console consoleArg, now time.Time) []string {
	g := globalArgs(cfg, dir)
	pidFile := filepath.Join(dir, "pid")
	switch {
	case cfg.Exec:
		return g.argv(execCmd{id: a.id, processFile: filepath.Join(dir, runcProcessFile), pidFile: pidFile, console: console}.args())
	case cfg.Checkpoint != "":
		work := filepath.Join(cfg.Checkpoint, "criu.work", "restore-"+string(appendTime(nil, now)))
		return g.argv(restoreCmd{id: a.id, bundle: a.bundle, pidFile: pidFile, imagePath: cfg.Checkpoint, workPath: work, console: console, opts: cfg.CheckpointOpts, noPivot: cfg.NoPivotRoot}.args())
	default:
		return g.argv(createCmd{id: a.id, bundle: a.bundle, pidFile: pidFile, console: console, noPivot: cfg.NoPivotRoot}.args())
	}
}

// runcProcessFile holds the bare OCI process object of an exec, the file
// given to `runc exec --process` (process.json carries our extra keys).
const runcProcessFile = "runc-process.json"
