package runtime

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"sync"
	"time"

	"github.com/evjournal/containerd/bundle"
)

// Features are the flags a runtime binary has, learnt from its own --help
// (runc 1.0.0-rc2, shipped with Docker 1.13, predates --console-socket;
// docs/api.md 7.2), and the spec version its --version names. The shim
// builds runc's command lines from them.
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
	// Spec is the runtime-spec version the runtime reads, from the "spec:"
	// line of its --version ("" when it names none: taken as today's). It
	// decides whether a bundle must be translated for it (Dialect).
	Spec string `json:"spec,omitempty"`
}

// Dialect is the shape of the specs this runtime reads.
func (f Features) Dialect() bundle.Dialect { return bundle.DialectFor(f.Spec) }

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

// probeFeatures reads the global and the create help, and the version.
// When either help cannot be read, today's runc is assumed: the start
// itself then reports why the runtime does not run. That answer is cached
// too, so a runtime that hangs costs the bound once per build, not once per
// start.
func probeFeatures(path string) Features {
	global, err := runtimeOutput(path, "--help")
	if err != nil {
		return allFeatures
	}
	create, err := runtimeOutput(path, "create", "--help")
	if err != nil {
		return allFeatures
	}
	version, _ := runtimeOutput(path, "--version")
	return Features{
		ConsoleSocket: hasFlag(create, "console-socket"),
		Log:           hasFlag(global, "log") && hasFlag(global, "log-format"),
		PidFile:       hasFlag(create, "pid-file"),
		NoNewKeyring:  hasFlag(create, "no-new-keyring"),
		PreserveFds:   hasFlag(create, "preserve-fds"),
		Spec:          specVersion(version),
	}
}

// specLine is the spec version line of a runtime's --version: "spec: 1.3.0"
// (runc since 1.0.0-rc3, crun), or "runc version spec: 1.0.0-rc2-dev" (runc
// 1.0.0-rc2, which prints only that line).
var specLine = regexp.MustCompile(`(?m)^(?:runc version )?spec: (\S+)\s*$`)

// specVersion is the spec version a runtime's --version names, or "".
func specVersion(out []byte) string {
	if m := specLine.FindSubmatch(out); m != nil {
		return string(m[1])
	}
	return ""
}

func runtimeOutput(path string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), featureTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
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
