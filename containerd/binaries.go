package main

import (
	"os"
	"os/exec"
	"path/filepath"

	"github.com/sirupsen/logrus"
)

// Where a runtime or shim binary was found, as the log says it.
const (
	fromFlag   = "flag"              // --runtime or --shim as given
	fromBeside = "beside the daemon" // in the daemon executable's own dir
	fromPATH   = "PATH"              // the name alone, looked up on PATH at each use
)

// chooseBinaries resolves --runtime and --shim (see chooseBinary) once,
// at start-up, with exeDir the daemon executable's dir.
func (cfg *config) chooseBinaries(exeDir string) {
	cfg.runtime, cfg.runtimeFrom = chooseBinary(cfg.runtime, cfg.runtimeFrom == fromFlag, exeDir)
	cfg.shim, cfg.shimFrom = chooseBinary(cfg.shim, cfg.shimFrom == fromFlag, exeDir)
}

// chooseBinary picks the binary for a flag's value and says where it was
// found. A value given on the command line is used as it is. The default
// name is looked for beside the daemon's executable first, so that a daemon
// started from a build dir (the repo's bin/) runs the shim and runc built
// with it although that dir is not on PATH; else the name is kept and found
// on PATH at each use, as v0.2.9 did.
func chooseBinary(value string, explicit bool, exeDir string) (name, from string) {
	if explicit {
		return value, fromFlag
	}
	if exeDir != "" && filepath.Base(value) == value {
		if p := filepath.Join(exeDir, value); isExecutable(p) {
			return p, fromBeside
		}
	}
	return value, fromPATH
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// executableDir is the dir of the running daemon's binary ("" if unknown:
// then only PATH is searched).
func executableDir() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return filepath.Dir(exe)
}

// logBinary says which binary was chosen for what ("runtime", "shim") and
// how, or warns when it cannot be found: the daemon still starts (it may be
// installed later), but no container can start until then.
func logBinary(what, name, from string, log *logrus.Entry) {
	path, err := exec.LookPath(name)
	if err != nil {
		log.WithError(err).WithField("from", from).Warnf("%s %s not found: containers cannot start until it is installed", what, name)
		return
	}
	log.WithFields(logrus.Fields{"path": path, "from": from}).Infof("%s chosen", what)
}
