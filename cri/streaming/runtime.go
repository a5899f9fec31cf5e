package streaming

import (
	"context"
	"fmt"
	"io"

	"github.com/containerd/errdefs"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// TermSize is a terminal size sent by the client of a tty stream. It is the
// library's type under another name, so resize events reach the runtime
// without a copying goroutine per stream.
type TermSize = remotecommand.TerminalSize

// Runtime runs what the streams ask for. The CRI service implements it on
// top of the supervisor.
//
// Every method must return once ctx is done: Stop cancels it and waits.
// stdin, stdout and stderr are nil when the request did not ask for them;
// resize is nil without a tty, and is closed when the client stops sending
// sizes. The server closes stdout and stderr after a method returns, which
// is what tells the client that the output is complete.
type Runtime interface {
	// Exec runs cmd in the container and returns the command's exit code.
	// err is for failures to run it at all (unknown container: NotFound).
	Exec(ctx context.Context, containerID string, cmd []string, stdin io.Reader, stdout, stderr io.WriteCloser, tty bool, resize <-chan TermSize) (exitCode int, err error)
	// Attach connects the streams to the container's main process until
	// the process exits or the client goes away.
	Attach(ctx context.Context, containerID string, stdin io.Reader, stdout, stderr io.WriteCloser, tty bool, resize <-chan TermSize) error
	// PortForward connects stream to port in the sandbox's network
	// namespace; ForwardInNetNS does it given the namespace's path.
	PortForward(ctx context.Context, podSandboxID string, port int32, stream io.ReadWriteCloser) error
}

// adapter is the library's Runtime. It ties each call to the server's
// lifetime (Stop cancels and waits for it) and translates exit codes.
type adapter struct {
	rt Runtime
	s  *Server
}

func (a adapter) Exec(ctx context.Context, id string, cmd []string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan TermSize) error {
	ctx, done, err := a.s.begin(ctx)
	if err != nil {
		return err
	}
	defer done()
	defer closeOutputs(out, errw)
	code, err := a.rt.Exec(ctx, id, cmd, in, out, errw, tty, resize)
	if err != nil {
		return fmt.Errorf("exec in container %s: %w", id, err)
	}
	if code != 0 {
		// The library recognises this exact type (a type assertion, not
		// errors.As, so it must not be wrapped) and sends the code to the
		// client as a NonZeroExitCode status.
		return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", code), Code: code}
	}
	return nil
}

func (a adapter) Attach(ctx context.Context, id string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan TermSize) error {
	ctx, done, err := a.s.begin(ctx)
	if err != nil {
		return err
	}
	defer done()
	defer closeOutputs(out, errw)
	if err := a.rt.Attach(ctx, id, in, out, errw, tty, resize); err != nil {
		return fmt.Errorf("attach to container %s: %w", id, err)
	}
	return nil
}

// PortForward is called once per forwarded connection. Its error is not
// wrapped: the library already prefixes it with the sandbox and the port.
func (a adapter) PortForward(ctx context.Context, sandboxID string, port int32, stream io.ReadWriteCloser) error {
	ctx, done, err := a.s.begin(ctx)
	if err != nil {
		return err
	}
	defer done()
	if err := checkPort(port); err != nil {
		return err
	}
	return a.rt.PortForward(ctx, sandboxID, port, stream)
}

func closeOutputs(ws ...io.WriteCloser) {
	for _, w := range ws {
		if w != nil {
			// The runtime may have closed it already; a second close
			// fails harmlessly.
			_ = w.Close()
		}
	}
}

func checkPort(port int32) error {
	if port < 1 || port > 65535 {
		return fmt.Errorf("port %d out of range 1-65535: %w", port, errdefs.ErrInvalidArgument)
	}
	return nil
}
