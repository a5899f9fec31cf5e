package runtime

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"sync"
	"time"
)

// Features are the flags a runtime binary has, learnt from its own --help
// (runc 1.0.0-rc2, shipped with Docker 1.13, predates --console-socket;
// docs/api.md 7.2). The shim builds runc's command lines from them.
type Features struct {
	// ConsoleSocket: `create`/`exec` take --console-socket (runc sends the
	// pty master on it). Without it the shim makes the pty and passes the
	// slave's path with --console, as the 0.2 shim did.
	ConsoleSocket bool `json:"consoleSocket"`
	// Log: the global --log and --log-format json, where runc writes its
	// error message.
	Log bool `json:"log"`
	// PidFile: `create`/`exec` take --pid-file; the shim cannot work without it.
	PidFile bool `json:"pidFile"`
	// NoNewKeyring and PreserveFds are known for the record (docs/api.md);
	// the daemon passes neither.
	NoNewKeyring bool `json:"noNewKeyring"`
	PreserveFds  bool `json:"preserveFds"`
}

// allFeatures is what is assumed of a runtime whose help cannot be read:
// today's runc (the failure to run it is reported by the start itself).
var allFeatures = Features{ConsoleSocket: true, Log: true, PidFile: true, NoNewKeyring: true, PreserveFds: true}

// featureTimeout bounds one `<runtime> ... --help`.
const featureTimeout = 10 * time.Second

// featureKey identifies one build of a runtime binary: a runtime replaced
// in place (a package upgrade) is probed again.
type featureKey struct {
	path  string
	mtime time.Time
	size  int64
}

var featureCache = struct {
	sync.Mutex
	m map[featureKey]Features
}{m: map[featureKey]Features{}}

// RuntimeFeatures returns the features of the runtime binary (a name is
// looked up in $PATH), probing it once per path and modification time.
func RuntimeFeatures(runtime string) Features {
	path, err := exec.LookPath(runtime)
	if err != nil {
		return allFeatures
	}
	fi, err := os.Stat(path)
	if err != nil {
		return allFeatures
	}
	key := featureKey{path: path, mtime: fi.ModTime(), size: fi.Size()}
	featureCache.Lock()
	f, ok := featureCache.m[key]
	featureCache.Unlock()
	if ok {
		return f
	}
	// Probed without the lock: a slow runtime delays only its own starts.
	// Two first starts of one runtime may both probe; same answer.
	f = probeFeatures(path)
	featureCache.Lock()
	featureCache.m[key] = f
	featureCache.Unlock()
	return f
}

// probeFeatures reads the global and the create help. When either cannot
// be read, today's runc is assumed: the start itself then reports why the
// runtime does not run. That answer is cached too, so a runtime that hangs
// costs the bound once per build, not once per start.
func probeFeatures(path string) Features {
	global, err := helpText(path)
	if err != nil {
		return allFeatures
	}
	create, err := helpText(path, "create")
	if err != nil {
		return allFeatures
	}
	return Features{
		ConsoleSocket: hasFlag(create, "console-socket"),
		Log:           hasFlag(global, "log") && hasFlag(global, "log-format"),
		PidFile:       hasFlag(create, "pid-file"),
		NoNewKeyring:  hasFlag(create, "no-new-keyring"),
		PreserveFds:   hasFlag(create, "preserve-fds"),
	}
}

func helpText(path string, sub ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), featureTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, append(sub, "--help")...)
	// A runtime killed at the timeout may have left a child holding its
	// stdout: without WaitDelay, Output would wait for that pipe for ever,
	// holding the feature cache and so every later create.
	cmd.WaitDelay = time.Second
	return cmd.Output()
}

// hasFlag finds "--name" as a whole flag in a help text ("--log" is not
// "--log-format").
func hasFlag(help []byte, name string) bool {
	return regexp.MustCompile(`(?m)(^|[\s,])--` + regexp.QuoteMeta(name) + `([\s,=]|$)`).Match(help)
}
