package podnet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	goruntime "runtime"
	"slices"
	"syscall"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/evjournal/containerd/internal/crashpoint"
)

// pluginExec runs the CNI plugins as libcni's RawExec does, except that an
// ADD dies with the daemon: one left running by a killed daemon went on
// after the restart had torn the pod down, and made its iptables rules (or
// its lease) for a pod that no longer exists, for ever. A DEL is left to
// finish: one cut short can leave what no later DEL finds (the bridge
// plugin removes its masquerading for the addresses it finds in the pod's
// netns, and the interface may be gone already). The crash tests kill the
// daemon while a plugin's ADD runs and after each one (docs/cri.md, "Crash
// points").
type pluginExec struct{ *invoke.DefaultExec }

func (e pluginExec) ExecPlugin(ctx context.Context, path string, stdin []byte, environ []string) ([]byte, error) {
	add := slices.Contains(environ, "CNI_COMMAND=ADD")
	out, err := runPlugin(ctx, path, stdin, environ, add)
	if add {
		crashpoint.At("run-pod:after-cni-plugin")
	}
	return out, err
}

// running is the crash point while a plugin runs: an ADD's dies with the
// daemon, a DEL's goes on.
func running(add bool, environ []string) {
	switch {
	case add:
		crashpoint.At("run-pod:cni-plugin-running")
	case slices.Contains(environ, "CNI_COMMAND=DEL"):
		crashpoint.At("network-down:cni-plugin-running")
	}
}

// runPlugin runs one plugin; an ADD with Pdeathsig set, from a thread kept
// locked until it exits (Pdeathsig is sent when the thread that forked
// exits, and another goroutine could end a thread it had locked).
func runPlugin(ctx context.Context, path string, stdin []byte, environ []string, add bool) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path)
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = environ, bytes.NewReader(stdin), &stdout, &stderr
	if add {
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		goruntime.LockOSThread()
		defer goruntime.UnlockOSThread()
	}
	if err := cmd.Start(); err != nil {
		return nil, pluginError(err, nil, nil)
	}
	running(add, environ)
	if err := cmd.Wait(); err != nil {
		return nil, pluginError(err, stdout.Bytes(), stderr.Bytes())
	}
	if stderr.Len() > 0 {
		os.Stderr.Write(stderr.Bytes()) // informational, as libcni does
	}
	return stdout.Bytes(), nil
}

// pluginError is a failed plugin's error as libcni makes it: the CNI error
// the plugin printed, else what it wrote to stderr.
func pluginError(err error, stdout, stderr []byte) error {
	e := &types.Error{}
	switch {
	case len(stdout) > 0:
		if perr := json.Unmarshal(stdout, e); perr != nil {
			e.Msg = fmt.Sprintf("netplugin failed but error parsing its diagnostic message %q: %v", stdout, perr)
		}
	case len(stderr) > 0:
		e.Msg = fmt.Sprintf("netplugin failed: %q", stderr)
	default:
		e.Msg = fmt.Sprintf("netplugin failed with no error message: %v", err)
	}
	return e
}
