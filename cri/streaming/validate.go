package streaming

import (
	"fmt"

	"github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The checks run before a URL is handed out: once the client connects, an
// error can only travel as a stream status, which kubectl shows poorly.

func validateExec(req *runtimeapi.ExecRequest) error {
	if req.GetContainerId() == "" {
		return invalid("exec: container id is empty")
	}
	if len(req.GetCmd()) == 0 {
		return invalid("exec: cmd is empty")
	}
	return validateStreams("exec", req.GetTty(), req.GetStdin(), req.GetStdout(), req.GetStderr(), false)
}

func validateAttach(req *runtimeapi.AttachRequest) error {
	if req.GetContainerId() == "" {
		return invalid("attach: container id is empty")
	}
	return validateStreams("attach", req.GetTty(), req.GetStdin(), req.GetStdout(), req.GetStderr(), true)
}

// validateStreams: a terminal has one output, so tty excludes stderr (the
// CRI says so); an exec must have an output to be of any use, an attach may
// only feed the process's stdin.
func validateStreams(what string, tty, stdin, stdout, stderr, stdinOnly bool) error {
	switch {
	case tty && stderr:
		return invalid(what + ": tty and stderr cannot both be set (a terminal has a single output)")
	case !stdout && !stderr && !stdinOnly:
		return invalid(what + ": one of stdout and stderr must be set")
	case !stdin && !stdout && !stderr:
		return invalid(what + ": one of stdin, stdout and stderr must be set")
	}
	return nil
}

func validatePortForward(req *runtimeapi.PortForwardRequest) error {
	if req.GetPodSandboxId() == "" {
		return invalid("port forward: pod sandbox id is empty")
	}
	for _, p := range req.GetPort() {
		if err := checkPort(p); err != nil {
			return fmt.Errorf("port forward: %w", err)
		}
	}
	return nil
}

func invalid(msg string) error {
	return fmt.Errorf("%s: %w", msg, errdefs.ErrInvalidArgument)
}
